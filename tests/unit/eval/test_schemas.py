"""The committed JSON Schemas are generated from the pydantic models (`make schema`)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import jsonschema  # type: ignore[import-untyped]
import pytest

from app.eval.config import RunConfig
from app.eval.run.runner import run_sync
from app.paths import PACKAGE_DIR

REPO = PACKAGE_DIR.parent
SCRIPT = REPO / "scripts" / "gen_schemas.py"


def gen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_schemas", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    "rel", ["reports/report.schema.json", "tests/eval/datasets/case.schema.json"]
)
def test_committed_schema_equals_the_generated_one(rel: str) -> None:
    mod = gen()
    generated = {p.relative_to(REPO).as_posix(): mod.render(s) for p, s in mod.targets().items()}
    committed = (REPO / rel).read_text(encoding="utf-8")
    assert committed == generated[rel], f"{rel} is stale: run `make schema`"
    jsonschema.Draft202012Validator.check_schema(json.loads(committed))


def test_check_mode_reports_a_stale_file_and_exit_1(tmp_path: Path) -> None:
    mod = gen()
    path, schema = next(iter(mod.targets().items()))
    stale = dict(schema, title="edited by hand")
    target = tmp_path / path.name
    target.write_text(mod.render(stale), encoding="utf-8")
    mod.targets = lambda: {target: schema}  # type: ignore[attr-defined]
    mod.ROOT = tmp_path  # type: ignore[attr-defined]
    assert mod.main(["--check"]) == 1
    assert target.read_text(encoding="utf-8") == mod.render(stale)  # --check writes nothing
    assert mod.main([]) == 0 and target.read_text(encoding="utf-8") == mod.render(schema)
    assert mod.main(["--check"]) == 0


def test_the_script_runs_clean_on_the_repository() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def test_a_written_report_validates_against_the_committed_schema(eval_root: Path) -> None:
    out = run_sync(RunConfig(suite="mini", cache=False, judge_samples=1), out_dir=eval_root)
    assert out.path is not None
    data = json.loads(out.path.read_text(encoding="utf-8"))
    schema = json.loads((REPO / "reports/report.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(data)
    data["cases"][0]["metrics"]["mrr"]["valeu"] = 1.0  # a typo is an error, not ignored
    errors = list(validator.iter_errors(data))
    assert errors and "valeu" in errors[0].message


def test_the_generated_case_schema_states_the_hand_written_rules() -> None:
    """The hand-written case.schema.json of wave 1 (kept in tests/data), field for field:
    generating it from the Case model changed no rule, only the description's last line."""
    from app.eval.datasets.case import case_json_schema

    before = json.loads((REPO / "tests/data/case.schema.wave1.json").read_text(encoding="utf-8"))
    now = case_json_schema()
    assert now["description"].startswith(before["description"])
    assert now["properties"]["history"]["items"].pop("description") == (
        "One earlier turn of a conversation."
    )
    for key in ("description",):
        before.pop(key), now.pop(key)
    # one field added since: the anchors of the labels (optional, machine-written)
    anchors = now["properties"].pop("anchors")
    assert anchors["propertyNames"] == {"pattern": now["properties"]["golden_chunk_ids"]["items"]["pattern"]}  # fmt: skip
    entry = anchors["additionalProperties"]
    assert entry["required"] == ["heading", "quote", "chars", "sha256"]
    assert entry["additionalProperties"] is False
    assert "anchors" not in now["required"]
    assert sorted(now.pop("required")) == sorted(before.pop("required"))
    assert now == before
