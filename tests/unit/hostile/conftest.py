"""Helpers for the hostile-input tests: run the real console entry point in-process."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType

import pytest


@dataclass
class Result:
    code: int
    out: str
    err: str


class Hang(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang("the command did not finish in time")


@pytest.fixture
def rag(capsys: pytest.CaptureFixture[str]) -> Iterator[Callable[..., Result]]:
    """``rag(*argv)`` -> Result(code, out, err); a hang fails the test after 20 s."""
    from app.cli import main

    def run(*argv: str, timeout: int = 20) -> Result:
        capsys.readouterr()
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(timeout)
        try:
            main(list(argv))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)
        captured = capsys.readouterr()
        assert "Traceback" not in captured.err, captured.err
        return Result(code, captured.out, captured.err)

    yield run
