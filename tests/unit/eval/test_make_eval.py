"""``make eval`` (issue 16, the honest first run): the Makefile's ``EVAL_ARGS`` — read from
the Makefile, so this is the command ``make eval`` runs — exits 0 on the shipped smoke suite
on the offline providers (the run completes, the red line holds) and prints the quality
verdicts as baseline-only; the same arguments exit 1 when a red line breaks (retrieval made
to ignore the ACLs, so restricted chunks reach a reader who may not see them)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import cli
from app.paths import repo_root


def _make_eval_args() -> list[str]:
    makefile = (repo_root() / "Makefile").read_text(encoding="utf-8")
    args = re.search(r"^EVAL_ARGS := (.+)$", makefile, re.MULTILINE)
    assert args is not None, "Makefile: EVAL_ARGS := … not found"
    recipe = re.search(r"^eval: .*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe is not None and "$(BIN)/rag $(EVAL_ARGS)" in recipe.group(1), recipe
    return shlex.split(args.group(1))


def _run(args: list[str], out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [*args, "--out", str(out), "--quiet"], catch_exceptions=False)
    return result.exit_code, result.output


def test_make_eval_exits_0_on_the_shipped_smoke_suite(tmp_path: Path) -> None:
    args = _make_eval_args()
    assert args[:2] == ["eval", "run"] and "smoke" in args
    code, out = _run(args, tmp_path)
    assert code == 0, out
    # the offline baseline misses quality thresholds (a sentence-picker is not a model) …
    reports = list(tmp_path.glob("eval_*.json"))
    assert len(reports) == 1
    from app.eval.report.io import load_report

    report = load_report(reports[0])
    assert not report.partial and report.totals.cases_done == report.totals.cases_planned
    missed = [n for n, v in report.verdicts.items() if v.verdict == "fail"]
    assert missed and "acl_leak" not in missed
    assert report.status == "pass"  # the gate asked for (red lines) held: exit 0
    # … and the output says which verdicts are baseline-only and which are red lines
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") > 8}
    for name in missed:
        assert "FAIL · baseline-only" in rows[name], rows[name]
    assert "pass · red line" in rows["acl_leak"], rows["acl_leak"]
    assert "red lines (acl_leak): hold · run complete" in out
    assert f"quality thresholds: {len(missed)} not met ({', '.join(missed)}) — baseline-only" in out
    assert "status: PASS — red lines held (acl_leak); quality not gated (offline baseline)" in out


def test_make_eval_exits_1_when_a_chunk_leaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.retrieval.index as index

    # a broken retriever: every chunk readable by everyone (the metric keeps the real rule)
    monkeypatch.setattr(index, "can_read", lambda user_acl, doc_acl: True)
    code, out = _run([*_make_eval_args(), "--limit", "8"], tmp_path)
    assert code == 1, out
    assert "red lines (acl_leak): FAIL acl_leak" in out
    assert "status: FAIL — red line(s) failed: acl_leak" in out
    from app.eval.report.io import load_report

    (path,) = tmp_path.glob("eval_*.json")
    report = load_report(path)
    leaked = [c.id for c in report.cases if c.metrics["acl_leak"].value == 1.0]
    assert leaked, "no case leaked: the fixture proves nothing"
