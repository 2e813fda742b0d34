"""`rag eval run` reads and validates its dataset once: the cases the check validated are
the run's. They must be exactly what the loader (`load_dataset_file`) gives for the same
file — every shipped suite, and a file with a BOM, CRLF line ends and blank lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.eval.config import RunConfig
from app.eval.datasets.case import Suite, load_dataset_file
from app.eval.run.runner import load_run_dataset
from app.paths import datasets_dir


def _same(a: Suite, b: Suite) -> None:
    assert (a.name, a.version, a.path, a.sha256) == (b.name, b.version, b.path, b.sha256)
    assert [c.model_dump(mode="json") for c in a.cases] == [
        c.model_dump(mode="json") for c in b.cases
    ]


@pytest.mark.parametrize("path", sorted(datasets_dir().glob("*.jsonl")), ids=lambda p: p.name)
def test_a_suite_file_gives_the_loaders_cases(path: Path) -> None:
    suite = load_run_dataset(RunConfig(suite="s", dataset_path=str(path)))
    assert len(suite.cases) > 10
    _same(suite, load_dataset_file(path))


def test_bom_crlf_and_blank_lines(tmp_path: Path) -> None:
    smoke = sorted(datasets_dir().glob("smoke_v*.jsonl"))[-1]
    lines = [json.dumps(json.loads(x), ensure_ascii=False) for x in smoke.read_text().splitlines()]
    odd = tmp_path / "odd cases.jsonl"  # not a suite's file name: allowed with --dataset
    odd.write_bytes(b"\xef\xbb\xbf" + "\r\n\r\n".join(lines[:5]).encode("utf-8") + b"\r\n\n   \n")
    suite = load_run_dataset(RunConfig(suite="s", dataset_path=str(odd)))
    assert len(suite.cases) == 5
    _same(suite, load_dataset_file(odd))
