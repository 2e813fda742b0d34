"""A new run opens its checkpoint in a thread (``Checkpoint.create(background=True)``) while
its first cases start: the first use waits for it, an error opening it is raised there, and
what a killed run leaves resumes as before (the tables and the configuration are one
transaction: a run killed while opening leaves both or neither)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.eval.run.checkpoint import Checkpoint
from tests.support import reports as r

RUN = "20261205T160000Z-ab12cd"


def test_a_checkpoint_opened_aside_saves_and_reopens_with_its_configuration(
    tmp_path: Path,
) -> None:
    cp = Checkpoint.create(RUN, {"suite": "smoke"}, tmp_path, background=True)
    case = r.case("kb-001", {"acl_leak": 0.0})
    cp.save(case, meta=("process:1", {"duration_s": 1.0}))
    # no close(): a killed run's file, read by another connection (what --resume opens)
    again = Checkpoint.open(RUN, tmp_path)
    assert again.config() == {"suite": "smoke"}
    assert again.done() == {"kb-001": case}
    assert again.processes() == [{"duration_s": 1.0}]
    again.close()
    cp.close()


def test_an_error_opening_it_is_raised_at_its_first_use(tmp_path: Path) -> None:
    (tmp_path / f"{RUN}.sqlite3").mkdir()  # a folder where the database file goes
    # create() refuses an existing path; the constructor meets the folder in the thread
    cp = Checkpoint(tmp_path / f"{RUN}.sqlite3", {"suite": "smoke"}, background=True)
    with pytest.raises(sqlite3.OperationalError):
        cp.save(r.case("kb-001", {"acl_leak": 0.0}))
    with pytest.raises(sqlite3.OperationalError):
        cp.close()


def test_the_tables_and_the_configuration_are_written_together(tmp_path: Path) -> None:
    """A failure between the tables and the configuration leaves neither."""
    path = tmp_path / f"{RUN}.sqlite3"
    with pytest.raises(TypeError):  # a configuration that is no JSON: after the tables
        Checkpoint(path, {"suite": object()})
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == []
