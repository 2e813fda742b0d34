"""One status per run: computed once, from the gate that was asked for, and said identically
by the console, the ``.md`` title, the viewer's run page and runs list, ``rag eval merge``,
and the exit code — naming what was gated.

Before: ``make eval`` printed ``status: PASS (gate red-lines; every threshold: FAIL)``, wrote a
``.md`` titled ``— smoke — FAIL``, the viewer marked the run red "fail", and ``rag eval merge``
of four good shards (run with ``--gate red-lines``) exited 1 with ``status: FAIL``.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import cli
from app.paths import repo_root


def _make_eval_args() -> list[str]:
    makefile = (repo_root() / "Makefile").read_text(encoding="utf-8")
    found = re.search(r"^EVAL_ARGS := (.+)$", makefile, re.MULTILINE)
    assert found is not None
    return shlex.split(found.group(1))


def _invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    return result.exit_code, result.output


def _console_status(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("status: ")]
    assert len(lines) == 1, out  # one status, printed once
    return lines[0].removeprefix("status: ")


def _md_status(md: Path, run_id: str, suite: str) -> str:
    title = md.read_text(encoding="utf-8").splitlines()[0]
    prefix = f"# Evaluation {run_id} — {suite} — "
    assert title.startswith(prefix), title
    return title.removeprefix(prefix)


def _viewer_statuses(report_path: Path) -> tuple[str, str]:
    """The status the viewer's run page and runs list show for the report."""
    from html import unescape

    from app.eval.report.io import load_report
    from app.eval.report.stream import read_summary
    from app.view.model import RunEntry
    from app.view.pages import run_page, runs_page

    report = load_report(report_path)
    page = run_page(report, {c.id: f"case/{c.id}" for c in report.cases})
    badge = re.search(r'<p id="status" class="status (\w+)">(.*?)</p>', page, re.S)
    assert badge is not None, page[:2000]
    entry = RunEntry(key=report.run_id, path=report_path, summary=read_summary(report_path))
    listing = runs_page([entry], "reports", {report.run_id: "run"}, "compare")
    cell = re.search(r'<td class="status (\w+)">(.*?)</td>', listing, re.S)
    assert cell is not None
    assert badge.group(1) == cell.group(1) == ("pass" if report.status == "pass" else "fail")
    return unescape(badge.group(2)), unescape(cell.group(2))


@pytest.fixture(scope="module")
def make_eval(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, Path]:
    out = tmp_path_factory.mktemp("make_eval")
    code, text = _invoke([*_make_eval_args(), "--out", str(out), "--quiet"])
    (report,) = out.glob("eval_*.json")
    return code, text, report


def test_make_eval_says_one_status_everywhere(make_eval: tuple[int, str, Path]) -> None:
    code, out, path = make_eval
    data = json.loads(path.read_text(encoding="utf-8"))
    line = _console_status(out)
    # what was gated, and whose numbers: the offline baseline's quality is not gated
    assert line == ("PASS — red lines held (acl_leak); quality not gated (offline baseline)"), line
    assert code == 0
    assert data["status"] == "pass" and data["status_line"] == line
    assert _md_status(path.with_suffix(".md"), data["run_id"], "smoke") == line
    assert _viewer_statuses(path) == (line, line)
    assert "every threshold: FAIL" not in out


def test_a_red_line_hit_is_one_fail_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.retrieval.index as index

    monkeypatch.setattr(index, "can_read", lambda user_acl, doc_acl: True)  # ACLs ignored
    code, out = _invoke([*_make_eval_args(), "--limit", "8", "--out", str(tmp_path), "--quiet"])
    (path,) = tmp_path.glob("eval_*.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    line = _console_status(out)
    assert code == 1 and data["status"] == "fail"
    assert line.startswith("FAIL — red line(s) failed: acl_leak (red line: "), line
    assert line.endswith("; quality not gated (offline baseline)"), line
    assert (
        data["status_line"] == line == _md_status(path.with_suffix(".md"), data["run_id"], "smoke")
    )
    assert _viewer_statuses(path) == (line, line)


def test_the_thresholds_gate_names_the_thresholds_not_met(tmp_path: Path) -> None:
    code, out = _invoke(["eval", "run", "--suite", "smoke", "--out", str(tmp_path), "--quiet"])
    (path,) = tmp_path.glob("eval_*.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    missed = [n for n, v in data["verdicts"].items() if v["verdict"] == "fail"]
    total = sum(1 for v in data["verdicts"].values() if v["verdict"] in ("pass", "fail"))
    line = _console_status(out)
    assert missed and code == 1 and data["status"] == "fail"
    assert line == (
        f"FAIL — {len(missed)} of {total - 1} thresholds not met: {', '.join(missed)}; "
        "red lines held (acl_leak) — offline-baseline numbers, not a model's"
    )
    assert (
        data["status_line"] == line == _md_status(path.with_suffix(".md"), data["run_id"], "smoke")
    )


def test_merge_of_good_shards_keeps_their_gate_and_their_status(tmp_path: Path) -> None:
    paths = []
    for i in (1, 2, 3, 4):
        args = [*_make_eval_args(), "--limit", "12", "--shard", f"{i}/4", "--quiet"]
        code, out = _invoke([*args, "--out", str(tmp_path / f"s{i}")])
        assert code == 0, out
        shard_line = _console_status(out)
        assert shard_line.startswith("PASS — red lines held (acl_leak); quality not gated")
        assert re.search(f" — shard {i}/4: [0-9]+ of the run's 12 cases$", shard_line), shard_line
        paths += [str(p) for p in (tmp_path / f"s{i}").glob("eval_*.json")]
    code, out = _invoke(["eval", "merge", *paths, "--out", str(tmp_path / "merged")])
    (merged,) = (tmp_path / "merged").glob("eval_*.json")
    data = json.loads(merged.read_text(encoding="utf-8"))
    line = _console_status(out)
    assert code == 0, out
    assert line == "PASS — red lines held (acl_leak); quality not gated (offline baseline)"
    assert data["status_line"] == line
    assert _md_status(merged.with_suffix(".md"), data["run_id"], "smoke") == line
    # the thresholds gate, asked for, gives the merged run that gate's one status
    code, out = _invoke(
        ["eval", "merge", *paths, "--gate", "thresholds", "--out", str(tmp_path / "t")]
    )
    assert code == 0 and _console_status(out).startswith("PASS — every threshold met (")


def test_a_partial_run_is_one_partial_everywhere(tmp_path: Path) -> None:
    args = [*_make_eval_args(), "--max-cost", "0", "--out", str(tmp_path), "--quiet"]
    code, out = _invoke(args)
    (path,) = tmp_path.glob("eval_*.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    line = _console_status(out)
    assert code == 1 and data["status"] == "partial"
    assert line.startswith("PARTIAL — 0 of 43 cases run (--max-cost"), line
    assert (
        data["status_line"] == line == _md_status(path.with_suffix(".md"), data["run_id"], "smoke")
    )
    assert _viewer_statuses(path) == (line, line)
