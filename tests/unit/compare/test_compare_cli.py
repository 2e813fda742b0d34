"""`rag eval compare` as a command: formats, exit codes, refusal."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner
from scipy import stats

from app.cli.eval_compare import compare
from app.errors import ReportError


def scores(seed: int, shift: float = 0.0) -> list[float]:
    rng = random.Random(seed)
    return [round(rng.randint(2, 4) + shift + rng.choice([-0.34, 0.0, 0.34]), 2) for _ in range(40)]


def test_fail_on_regression_exits_1(make_report, write_report) -> None:  # type: ignore[no-untyped-def]
    base = scores(1)
    new = [round(v - 0.6, 2) for v in base]
    a = write_report("a.json", make_report({"faithfulness": base}))
    b = write_report("b.json", make_report({"faithfulness": new}))
    res = CliRunner().invoke(compare, [str(a), str(b), "--fail-on-regression"])
    assert res.exit_code == 1, res.output
    assert "❌ significant regression" in res.output
    res_no_gate = CliRunner().invoke(compare, [str(a), str(b)])
    assert res_no_gate.exit_code == 0


def test_improvement_exits_0_with_gate(make_report, write_report) -> None:  # type: ignore[no-untyped-def]
    base = scores(2)
    new = [round(v + 0.6, 2) for v in base]
    a = write_report("a.json", make_report({"faithfulness": base}))
    b = write_report("b.json", make_report({"faithfulness": new}))
    res = CliRunner().invoke(compare, [str(a), str(b), "--fail-on-regression"])
    assert res.exit_code == 0, res.output
    assert "✅ better" in res.output


def test_json_format(make_report, write_report, tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = scores(3)
    new = scores(3, shift=0.5)
    a = write_report("a.json", make_report({"faithfulness": base, "acl_leak": [0.0] * 40}))
    b = write_report("b.json", make_report({"faithfulness": new, "acl_leak": [0.0] * 40}))
    out = tmp_path / "cmp.json"
    res = CliRunner().invoke(compare, [str(a), str(b), "--format", "json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data == json.loads(res.output)
    faith = next(r for r in data["rows"] if r["metric"] == "faithfulness")
    assert faith["verdict"] == "better" and faith["symbol"] == "✅"
    # scipy is the reference; app/eval/stats/distributions.py computes the same to rounding
    assert faith["p_value"] == pytest.approx(stats.wilcoxon(new, base).pvalue, rel=1e-12)
    assert data["has_regression"] is False and data["paired"] == 40


def test_ruler_mismatch_is_a_user_error(make_report, write_report) -> None:  # type: ignore[no-untyped-def]
    base = scores(4)
    a = write_report(
        "a.json", make_report({"faithfulness": base}, judge="anthropic:claude-opus-4-7")
    )
    b = write_report("b.json", make_report({"faithfulness": base}, judge="offline:reference-judge"))
    res = CliRunner().invoke(compare, [str(a), str(b)])
    assert isinstance(res.exception, ReportError)
    assert "anthropic:claude-opus-4-7" in str(res.exception)
    assert "offline:reference-judge" in str(res.exception)
    ok = CliRunner().invoke(compare, [str(a), str(b), "--allow-ruler-change"])
    assert ok.exit_code == 0 and "ruler changed" in ok.output


def test_unreadable_report_names_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    bad.write_text('{"meta": {}', encoding="utf-8")
    res = CliRunner().invoke(compare, [str(bad), str(bad)])
    assert isinstance(res.exception, ReportError)
    assert "bad.json:1: not valid JSON" in str(res.exception)
    missing = CliRunner().invoke(compare, [str(tmp_path / "nope.json"), str(bad)])
    assert isinstance(missing.exception, ReportError) and "no such report" in str(missing.exception)


def test_a_non_numeric_metric_value_is_refused_with_the_case(make_report, write_report) -> None:  # type: ignore[no-untyped-def]
    good = make_report({"faithfulness": [4.0, 3.0, 5.0]})
    bad = make_report({"faithfulness": [4.0, 3.0, 5.0]}).model_dump(mode="json")
    bad["cases"][1]["metrics"]["faithfulness"]["value"] = "abc"
    a = write_report("a.json", good)
    b = write_report("b.json", bad)
    res = CliRunner().invoke(compare, [str(a), str(b)])
    assert isinstance(res.exception, ReportError)
    message = str(res.exception)
    # the file, the case (index and id), the field, the problem and the value found
    assert message.startswith(f"{b}: cases[1] (case kb-002): not a valid case")
    assert "metrics/faithfulness/value: Input should be a valid number" in message
    assert "(got 'abc')" in message


def test_a_duplicate_case_id_is_refused_naming_it(make_report, write_report) -> None:  # type: ignore[no-untyped-def]
    good = make_report({"faithfulness": [4.0, 3.0, 5.0]})
    twice = good.model_dump(mode="json")
    twice["cases"][2]["id"] = "kb-001"
    a, b = write_report("a.json", good), write_report("b.json", twice)
    res = CliRunner().invoke(compare, [str(a), str(b)])
    assert isinstance(res.exception, ReportError)
    assert "case id 'kb-001' appears twice" in str(res.exception)


def test_a_v1_report_is_compared_after_conversion(write_report, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil
    from pathlib import Path

    v1 = Path(__file__).parents[2] / "data" / "reports" / "v1_adversarial.json"
    old = tmp_path / "old.json"
    shutil.copy(v1, old)
    res = CliRunner().invoke(compare, [str(old), str(old), "--format", "json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["paired"] == 6 and data["offline"] is True
    assert {r["verdict"] for r in data["rows"]} <= {"no_change", "no_data", "not_measured"}


def test_a_rate_holding_7_is_a_report_error_naming_the_case(make_report, write_report) -> None:  # type: ignore[no-untyped-def]
    """A binary metric holding 7 crashed the command (ValueError: McNemar needs 0/1)."""
    a = write_report("a.json", make_report({"citation_accuracy": [1.0, 0.0, 1.0, 1.0]}))
    b = write_report("b.json", make_report({"citation_accuracy": [1.0, 7.0, 1.0, 0.0]}))
    res = CliRunner().invoke(compare, [str(a), str(b)])
    assert isinstance(res.exception, ReportError), res.output
    said = str(res.exception)
    assert "b.json" in said and "'kb-002'" in said and "citation_accuracy = 7" in said


def test_an_unwritable_out_is_a_user_error(make_report, write_report) -> None:  # type: ignore[no-untyped-def]
    """`-o /proc/nope/x.md` raised FileNotFoundError with a traceback."""
    from app.errors import UserError

    a = write_report("a.json", make_report({"faithfulness": scores(5)}))
    for fmt in ("md", "html"):
        res = CliRunner().invoke(
            compare, [str(a), str(a), "--format", fmt, "-o", "/proc/nope/x.md"]
        )
        assert isinstance(res.exception, UserError), (fmt, res.output, res.exception)
        assert "/proc/nope/x.md: cannot write it" in str(res.exception)


def test_the_hostile_compare_inputs_each_change_the_report(
    make_report, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """scripts/hostile_inputs.py's "summary mean NaN" replaced ``"mean": `` (with a space),
    but reports are written compact (``"mean":``): its "bad" report was the good one, and
    `rag eval compare` rightly exited 0. Every mutation meant to be refused must change the
    report, and the NaN summary mean is an exit-2 message naming the file."""
    import importlib.util
    import sys
    from itertools import takewhile
    from pathlib import Path

    script = Path(__file__).parents[3] / "scripts" / "hostile_inputs.py"
    spec = importlib.util.spec_from_file_location("hostile_inputs", script)
    assert spec is not None and spec.loader is not None
    hostile = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "hostile_inputs", hostile)  # its dataclasses look it up
    spec.loader.exec_module(hostile)
    report = make_report({"faithfulness": [3.0, 4.0], "acl_leak": [0.0, 0.0]})
    data = report.model_dump(mode="json")
    path = tmp_path / "base.json"
    path.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")  # as the runner
    (tmp_path / "c").mkdir()
    original = path.read_bytes()
    # the report mutations (the file hazards after them open sockets and FIFOs: not here)
    mutations = takewhile(
        lambda c: not c.label.startswith("file:"), hostile.compare_cases(tmp_path / "c", path)
    )
    cases = {c.label: c for c in mutations}
    assert "summary mean NaN" in cases and "metric NaN" in cases
    for label, case in cases.items():
        if case.expect != {0}:
            assert Path(case.argv[-1]).read_bytes() != original, label
    nan = cases["summary mean NaN"]
    res = CliRunner().invoke(compare, nan.argv[2:])
    assert isinstance(res.exception, ReportError)  # the CLI's exit 2 (test_unreadable_report…)
    assert str(res.exception).startswith(f"{nan.argv[-1]}: not valid JSON: NaN")
    # … and names the field that holds it (the first "mean" of the file: a metric's summary)
    assert "(field `summary.faithfulness.mean`)" in str(res.exception)
