"""`rag eval run|baseline|compare`, `rag report html`, and the header-baseline check."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.cli import main
from app.eval.report.baseline import check_header_baselines, record_baseline
from app.generation.registry.header import Baseline


def rag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture
def report_path(eval_root: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    rc, out, err = rag(
        ["eval", "run", "--suite", "mini", "--quiet", "--out", str(eval_root / "reports")], capsys
    )
    match = re.search(r"report: (\S+\.json)", out)
    assert match, out + err
    path = Path(match.group(1))
    report = json.loads(path.read_text(encoding="utf-8"))
    assert rc == (0 if report["status"] == "pass" else 1)
    assert "hit_rate" in out and "status:" in out and "offline baseline" in out
    assert re.search(r"run \d{8}T\d{6}Z-[0-9a-f]{6}", err)
    return path


def test_run_prints_summary_and_writes_report(report_path: Path) -> None:
    assert report_path.exists() and report_path.with_suffix(".md").exists()
    md = report_path.with_suffix(".md").read_text(encoding="utf-8")
    assert "| metric | n |" in md and "offline baseline" in md


def test_bad_input_exits_2(eval_root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = rag(["eval", "run", "--suite", "nope", "--quiet"], capsys)
    assert rc == 2 and "nope" in err
    rc, _, err = rag(
        [
            "eval",
            "run",
            "--suite",
            "mini",
            "--model",
            "offline:extractive",
            "--judge",
            "offline:extractive",
            "--quiet",
        ],
        capsys,
    )
    assert rc == 2 and "candidate model itself" in err
    rc, _, err = rag(
        ["eval", "run", "--resume", "19990101T000000Z-abcdef", "--suite", "mini"], capsys
    )
    assert rc == 2 and "no checkpoint" in err


def test_report_html(report_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    rc, stdout, _ = rag(["report", "html", str(report_path), "-o", str(out)], capsys)
    assert rc == 0 and str(out) in stdout
    html = out.read_text(encoding="utf-8")
    run_id = json.loads(report_path.read_text(encoding="utf-8"))["run_id"]
    assert run_id in html and '<script src="r_cases/rows-0.js"></script>' in html
    # the table's rows and the cases' data beside it; the one case page links back
    rows = (tmp_path / "r_cases" / "rows-0.js").read_text(encoding="utf-8")
    assert '"id":"mini-003"' in rows
    assert 'href="../r.html"' in (tmp_path / "r_cases" / "case.html").read_text(encoding="utf-8")


def test_eval_group_lists_lazy_commands(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = rag(["eval", "--help"], capsys)
    assert rc == 0
    for name in ("run", "baseline", "compare", "diff-prompt"):
        assert name in out


def test_baseline_and_header_check(
    report_path: Path, eval_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the offline run is no 评测基线: refused, exit 2, nothing recorded
    rc, out, err = rag(["eval", "baseline", str(report_path), "--prompt", "system/kb_qa"], capsys)
    stored = eval_root / "reports/baselines/system/kb_qa_v2.json"
    assert rc == 2 and "offline:extractive" in err and "评测基线" in err, err
    assert "Traceback" not in err and not stored.exists()
    # the same numbers as a model's run (candidate and judge real models) are recorded
    report = json.loads(report_path.read_text(encoding="utf-8"))
    report["meta"]["candidate"] = {"provider": "openai:gpt-4o", "offline": False}
    report["meta"]["judge"]["provider"] = "anthropic:claude-opus-4-7"
    report["meta"]["judge"]["offline"] = False
    model_run = report_path.with_name("eval_model.json")
    model_run.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    rc, out, err = rag(["eval", "baseline", str(model_run), "--prompt", "system/kb_qa"], capsys)
    assert rc == 0, err
    assert str(stored) in out
    data = json.loads(stored.read_text(encoding="utf-8"))
    recorded = data["suites"]["mini"]
    assert recorded["run_id"] == report["run_id"] and recorded["offline"] is False
    faith = report["summary"]["faithfulness"]["mean"]
    assert recorded["metrics"]["faithfulness"] == faith

    def registry(*lines: Baseline) -> SimpleNamespace:
        mod = SimpleNamespace(
            rel="system/kb_qa_v2.py",
            spec=SimpleNamespace(qualified="system/kb_qa_v2"),
            header=SimpleNamespace(baselines=lines),
        )
        return SimpleNamespace(modules=[mod])

    root = eval_root / "reports/baselines"
    good = Baseline("mini", (("faithfulness", round(faith, 2)),), date(2026, 11, 30), 14)
    assert check_header_baselines(registry(good), root) == []
    wrong = Baseline("mini", (("faithfulness", round(faith, 2) - 0.5),), date(2026, 11, 30), 14)
    (v,) = check_header_baselines(registry(wrong), root)
    assert (v.code, v.file, v.line) == ("P027", "system/kb_qa_v2.py", 14)
    assert report["run_id"] in v.message and "fix" in v.format()
    missing = Baseline("smoke", (("faithfulness", 4.35),), date(2026, 11, 30), 15)
    (v,) = check_header_baselines(registry(missing), root)
    assert v.code == "P026" and v.to_dict()["name"] == "baseline-not-recorded"
    # a baseline recorded from an offline run (before the refusal) backs no header line
    data["suites"]["mini"]["offline"] = True
    data["suites"]["mini"]["candidate"] = {"provider": "offline:extractive", "offline": True}
    stored.write_text(json.dumps(data), encoding="utf-8")
    (v,) = check_header_baselines(registry(good), root)
    assert v.code == "P026" and "offline:extractive" in v.message and "not a model's" in v.message
    # … nor one from a run with a model outside APPLICABLE_MODELS
    data["suites"]["mini"]["offline"] = False
    data["suites"]["mini"]["candidate"] = {"provider": "openai:gpt-4o", "offline": False}
    data["suites"]["mini"]["unlisted_models"] = [{"prompt": "system/kb_qa_v2", "model": "x:y"}]
    stored.write_text(json.dumps(data), encoding="utf-8")
    (v,) = check_header_baselines(registry(good), root)
    assert v.code == "P026" and "--allow-unlisted-model" in v.message


def test_baseline_refuses_a_prompt_the_report_did_not_run(report_path: Path) -> None:
    from app.errors import ReportError

    with pytest.raises(ReportError, match="did not run"):
        record_baseline(report_path, "system/kb_strict_v1")
