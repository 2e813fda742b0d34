"""scripts/gen_cases.py: an N-case dataset from every shipped suite that loads as a dataset,
goes through every shipped case before repeating one, rewords only with --vary (a bounded
number of variants), and is byte-for-byte the same for the same arguments."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from app.eval.datasets.case import load_dataset_file
from app.paths import PACKAGE_DIR


def _script() -> Any:
    path = PACKAGE_DIR.parent / "scripts" / "gen_cases.py"
    spec = importlib.util.spec_from_file_location("gen_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_cases", module)
    spec.loader.exec_module(module)
    return module


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]


def test_every_shipped_case_comes_once_before_any_repeats(tmp_path: Path) -> None:
    gen = _script()
    source = gen.source_cases()
    shipped = PACKAGE_DIR.parent / "tests" / "eval" / "datasets"
    files = [
        sorted(shipped.glob(f"{s}_v*.jsonl"))[-1] for s in ("smoke", "full", "hard", "adversarial")
    ]
    assert len(source) == sum(len(_rows(f)) for f in files)
    n = len(source) + 7
    path = gen.generate(n, tmp_path / "a")
    rows = _rows(path)
    assert [r["id"] for r in rows[:2]] == ["gen-000001", "gen-000002"] and len(rows) == n
    key = lambda r: json.dumps({k: v for k, v in r.items() if k != "id"}, sort_keys=True)  # noqa: E731
    assert sorted(key(r) for r in rows[: len(source)]) == sorted(key(r) for r in source)
    suite = load_dataset_file(path)  # a dataset the runner takes (--dataset)
    assert len(suite.cases) == n
    assert gen.generate(n, tmp_path / "b").read_bytes() == path.read_bytes()


def test_vary_rewords_with_a_bounded_number_of_variants(tmp_path: Path) -> None:
    gen = _script()
    source = {r["question"] for r in gen.source_cases()}
    rows = _rows(gen.generate(3 * len(source), tmp_path, vary=True, seed=3))
    questions = {r["question"] for r in rows}
    assert questions - source  # some reworded
    assert len(questions) <= (len(gen.VARIANTS) + 1) * len(source)
    assert gen.varied("年假有多少天？", 1) == "请问，年假有多少天？"
    assert gen.varied("How many days?", 2) == "How many days? Thanks!"
