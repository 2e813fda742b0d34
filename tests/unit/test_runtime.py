"""The ``rag`` process's GC setting (app/runtime.py): applied by the entry point only."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.runtime import GEN0_THRESHOLD, tune_gc

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_raises_the_default_gen0_threshold_and_keeps_the_older_generations() -> None:
    gc.set_threshold(700, 7, 9)
    tune_gc()
    assert gc.get_threshold() == (10_000, 7, 9)
    assert GEN0_THRESHOLD == 10_000


@pytest.mark.parametrize("setting", [(50_000, 10, 10), (0, 10, 10)])
def test_a_higher_threshold_or_a_disabled_collector_is_left_alone(
    setting: tuple[int, int, int],
) -> None:
    gc.set_threshold(*setting)
    tune_gc()
    assert gc.get_threshold() == setting


def test_the_entry_point_applies_it() -> None:
    import app.cli

    gc.set_threshold(700, 10, 10)
    assert gc.get_threshold()[0] == 700
    with pytest.raises(SystemExit) as exc:
        app.cli.main(["--help"])
    assert exc.value.code == 0
    assert gc.get_threshold() == (GEN0_THRESHOLD, 10, 10)


def test_peak_rss_is_the_process_own_not_its_parents() -> None:
    """A child process started by a big parent: getrusage's ru_maxrss carries the parent's
    size over the exec (what made a worker process report the main process's size), the
    kernel's VmHWM, which peak_rss_mb reads, does not."""
    import subprocess
    import sys

    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc: peak_rss_mb falls back to ru_maxrss")
    parent = (
        "import subprocess, sys\n"
        "big = bytearray(160 * 1024 * 1024)\n"
        "for i in range(0, len(big), 4096): big[i] = 1\n"
        "code = 'import resource; from app.runtime import peak_rss_mb; "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, peak_rss_mb())'\n"
        "print(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,"
        " check=True).stdout)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", parent], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    inherited, own = float(out[0]), float(out[1])
    assert inherited >= 160  # the parent's pages, reported by the child's getrusage
    assert 5 < own < 100  # the child's own interpreter and imports


def _freeze_count_after(argv: str) -> tuple[int, str, int]:
    """(objects frozen when main() returned, its stdout, its exit code) in a fresh process."""
    import subprocess
    import sys

    code = (
        "import gc, sys\nfrom app.cli import main\n"
        f"sys.argv = ['rag', '--version']\nargv = {argv}\n"
        "try:\n    main(argv)\nexcept SystemExit as exc:\n"
        "    sys.stdout.flush()\n    sys.stderr.write(f'{gc.get_freeze_count()} {exc.code}')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    frozen, rc = out.stderr.split()[-2:]
    return int(frozen), out.stdout, int(rc)


def test_the_program_entry_point_freezes_what_is_left_for_the_exit() -> None:
    frozen, stdout, rc = _freeze_count_after("None")  # the `rag` script: argv from sys.argv
    assert frozen > 1000 and rc == 0
    assert stdout.startswith("rag, version")


def test_a_caller_passing_argv_keeps_its_collector_as_it_was() -> None:
    frozen, stdout, rc = _freeze_count_after("['--version']")
    assert frozen == 0 and rc == 0
    assert stdout.startswith("rag, version")
