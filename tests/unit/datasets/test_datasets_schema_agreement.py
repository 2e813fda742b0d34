"""case.schema.json (for editors) and the pydantic Case model (the rules) list the same fields.

The rules live only on :class:`app.eval.datasets.case.Case`: the checker validates with it and
translates its errors, so "check and loader agree" holds by construction (see
test_datasets_property). What is left to guard here is the editor-facing schema.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from _datasets_support import DATASETS, schema

from app.eval.datasets.case import CASE_FIELDS, Case, iter_lines


def test_schema_and_model_list_the_same_fields() -> None:
    assert set(schema()["properties"]) == set(CASE_FIELDS)
    assert set(schema()["required"]) == {
        name for name, f in Case.model_fields.items() if f.is_required()
    }


def test_every_shipped_case_is_valid_under_both() -> None:
    validator = jsonschema.Draft202012Validator(schema())
    n = 0
    for path in sorted(DATASETS.glob("*.jsonl")):
        for _, text in iter_lines(path.read_text(encoding="utf-8")):
            if text.strip():
                obj: dict[str, Any] = json.loads(text)
                assert validator.is_valid(obj), (path.name, obj.get("id"))
                Case.model_validate(obj)
                n += 1
    assert n >= 500
