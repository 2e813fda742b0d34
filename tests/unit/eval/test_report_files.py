"""Report files (issue 12): concurrent runs with the same ``--out`` silently lost reports
(the file name was the second), and 5 of 10 kills during report writing left ``.tmp``
files. Names are now unique per run id, files are created new (never replaced), and a
kill at any moment leaves either the whole file or nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from app.eval.report.io import report_filename
from app.safe_io import sweep_stale_temp_files, write_new_text

ROOT = Path(__file__).resolve().parents[3]

WRITER = """
import sys, json
sys.path.insert(0, {root!r})
from pathlib import Path
from app.safe_io import write_new_text
out = Path(sys.argv[1]); tag = sys.argv[2]
blob = json.dumps({{"tag": tag, "pad": "x" * 1_000_000}})
print("READY", flush=True)
n = 0
while True:
    n += 1
    write_new_text(out / f"eval_{{tag}}.json", blob)
"""


def test_names_are_unique_per_run_id() -> None:
    a = report_filename("2026-12-01T10:00:00Z", "20261201T100000Z-aaaaaa")
    b = report_filename("2026-12-01T10:00:00Z", "20261201T100000Z-bbbbbb")
    assert a == "eval_20261201T100000Z-aaaaaa.json" and a != b


def test_write_new_text_never_replaces_a_file(tmp_path: Path) -> None:
    first = write_new_text(tmp_path / "eval_x.json", "one")
    second = write_new_text(tmp_path / "eval_x.json", "two")
    assert (first.name, second.name) == ("eval_x.json", "eval_x-2.json")
    assert first.read_text() == "one" and second.read_text() == "two"
    assert oct(first.stat().st_mode & 0o777) != "0o600"  # an ordinary file, not a temp one
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_concurrent_writers_of_the_same_name_all_keep_their_file(tmp_path: Path) -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from pathlib import Path\n"
        "from app.safe_io import write_new_text\n"
        "import time; t = float(sys.argv[2])\n"
        "while time.time() < t: pass\n"
        "print(write_new_text(Path(sys.argv[1]) / 'eval_same.json', sys.argv[3]))\n"
    )
    start = time.time() + 1.5
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path), str(start), f"report {i}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    written = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(written)) == 6
    texts = sorted(Path(w).read_text() for w in written)
    assert texts == sorted(f"report {i}" for i in range(6))


def test_kill_during_writing_leaves_no_temp_and_no_half_file(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(root=str(ROOT)))
    out = tmp_path / "out"
    out.mkdir()
    for k in range(10):
        proc = subprocess.Popen(
            [sys.executable, str(script), str(out), f"k{k}"], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
        time.sleep(0.05 + 0.037 * k)  # somewhere inside one of its writes
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        leftovers = [p.name for p in out.iterdir() if p.name.endswith(".tmp")]
        assert leftovers == [], f"kill {k} left {leftovers}"
        for path in out.glob("*.json"):
            assert json.loads(path.read_text())["tag"].startswith("k"), path


def test_stale_temp_files_of_dead_writers_are_swept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], stdout=-1)
    pid = int(dead.stdout)
    stale = tmp_path / f".eval_x.json.{pid}.abc123.tmp"
    stale.write_text("half")
    mine = tmp_path / f".eval_y.json.{os.getpid()}.def456.tmp"
    mine.write_text("in progress")
    assert sweep_stale_temp_files(tmp_path) == [stale]
    assert not stale.exists() and mine.exists()
