"""The benchmarks page is generated: `scripts/bench.py --markdown` writes its tables.

The renderer is tested on canned rows (no benchmark is timed here), and one real run of the
fastest benchmark proves the whole path: the benchmark records its rows, bench.py renders
them between the page's markers and leaves the rest of the page alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.unit.docs.test_docs import work_log_hits

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "bench.py"


def bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_page", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_on_rows(rows: Path, *more: str) -> subprocess.CompletedProcess[str]:
    """``scripts/bench.py --rows ROWS [more…]`` in a subprocess: renders saved rows, runs nothing."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--rows", str(rows), *more],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


ROWS = [
    {"bench": "registry", "what": "check 200 modules", "target": "< 0.5 s",
     "measured": "0.120 s", "ok": True, "ratio": 0.24},
    {"bench": "engine", "what": "peak RSS", "target": "≤ 150 MB", "measured": "171.0 MB",
     "ok": False, "ratio": 1.14},
    {"bench": "engine", "what": "zero latency | per call", "target": "—", "measured": "2.05 ms",
     "ok": None, "ratio": None},
]  # fmt: skip
INFO = {"cpu": "Test CPU @ 2.0GHz", "cores": "2", "python": "3.11.9", "load": "0.10 / 0.20 / 0.30"}


def test_rows_render_as_one_table_per_benchmark_with_the_machine_and_command() -> None:
    bench = bench_module()
    block = bench.render(ROWS, INFO, "python scripts/bench.py --markdown")
    lines = block.splitlines()
    assert lines[0] == bench.BEGIN and lines[-1] == bench.END
    assert "Command: `python scripts/bench.py --markdown`" in block
    assert (
        "Machine: Test CPU @ 2.0GHz, 2 cores, Python 3.11.9; load average at the start "
        "0.10 / 0.20 / 0.30 (1 / 5 / 15 min)." in block
    )
    # the engine's table comes before the registry's (the page's order), rows as recorded
    assert block.index("### Engine") < block.index("### Prompt registry")
    assert "| peak RSS | ≤ 150 MB | 171.0 MB | 1.14 | ❌ |" in lines
    assert "| zero latency \\| per call | — | 2.05 ms |  | — |" in lines
    assert "| check 200 modules | < 0.5 s | 0.120 s | 0.24 | ✅ |" in lines


def test_the_page_outside_the_markers_is_kept_and_the_block_is_replaced() -> None:
    bench = bench_module()
    page = f"# Benchmarks\n\nintro\n\n{bench.BEGIN}\nold numbers\n{bench.END}\n\n## After\n"
    new = bench.update_page(page, bench.render(ROWS[:1], INFO, "cmd"))
    assert new.startswith("# Benchmarks\n\nintro\n\n")
    assert new.endswith(f"{bench.END}\n\n## After\n")
    assert "old numbers" not in new and "| check 200 modules |" in new
    assert new.count(bench.BEGIN) == 1 and new.count(bench.END) == 1


def test_a_generated_block_passes_the_docs_rules() -> None:
    """The load average is stated inside the generated block, and nowhere else is it allowed."""
    bench = bench_module()
    assert not work_log_hits(bench.render(ROWS, INFO, "python scripts/bench.py --markdown"))


def test_rows_saved_earlier_render_without_running_anything(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    page = tmp_path / "benchmarks.md"
    page.write_text("# B\n\n<!-- bench:begin -->\n<!-- bench:end -->\n", encoding="utf-8")
    proc = bench_on_rows(rows, "--markdown", str(page))
    assert proc.returncode == 0, proc.stderr
    assert "== bench_" not in proc.stdout  # nothing ran
    assert "| peak RSS | ≤ 150 MB | 171.0 MB | 1.14 | ❌ |" in page.read_text(encoding="utf-8")


def test_one_real_benchmark_writes_its_rows_into_the_page(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text((ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8"), "utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--markdown", str(page), "--only", "registry"],
        capture_output=True, text=True, timeout=300, check=False, cwd=ROOT, env=env,
    )  # fmt: skip
    # exit 1 is a missed time target on a loaded machine: the page is written either way
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    text = page.read_text(encoding="utf-8")
    assert "### Prompt registry" in text
    assert "| discover + check 200 prompt modules (best of 5) | < 0.5 s |" in text
    assert "--only registry" in text and "cores, Python" in text
    assert text.startswith("# Benchmarks\n") and "## Quality of the offline stack" in text
    assert not work_log_hits(text)


def test_the_last_line_counts_every_missed_target_across_benchmarks(tmp_path: Path) -> None:
    """Each benchmark prints its own "targets:" line; the run ends with one verdict for all of
    them, naming the misses, so an "all met" of the last benchmark is not read as the run's."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n", encoding="utf-8")
    proc = bench_on_rows(rows)
    last = proc.stdout.strip().splitlines()[-1]
    assert last == "bench.py: 1 of 2 targets missed: engine: peak RSS (171.0 MB; target ≤ 150 MB)"

    met = tmp_path / "met.jsonl"
    met.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps(ROWS[2]) + "\n", encoding="utf-8")
    proc = bench_on_rows(met)
    assert proc.stdout.strip().splitlines()[-1] == "bench.py: all 1 target(s) met"


def test_a_benchmark_that_exited_non_zero_is_named_and_never_reads_as_all_met() -> None:
    """A benchmark that crashed records fewer rows (or none): the rows that remain may all be
    met, and the run's verdict must still say that something was not measured."""
    bench = bench_module()
    line = bench.verdict([ROWS[0]], failed=["bench_engine (exit 1)"])
    assert line == "bench.py: 1 target(s) met; exited non-zero: bench_engine (exit 1)"
    assert bench.verdict([], failed=["bench_chaos (exit 2)"]) == (
        "bench.py: no target was measured; exited non-zero: bench_chaos (exit 2)"
    )
