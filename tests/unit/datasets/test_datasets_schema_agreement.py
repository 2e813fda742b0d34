"""case.schema.json and the pydantic Case model agree on every shipped and every broken case."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from _datasets_support import DATASETS, schema, valid_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from app.eval.datasets import CASE_FIELDS, Case, iter_lines


def pydantic_ok(obj: Any) -> bool:
    try:
        Case.model_validate(obj)
    except ValidationError:
        return False
    return True


def schema_ok(obj: Any) -> bool:
    return bool(jsonschema.Draft202012Validator(schema()).is_valid(obj))


def shipped_cases() -> Iterator[dict[str, Any]]:
    for path in sorted(DATASETS.glob("*.jsonl")):
        for _, text in iter_lines(path.read_text(encoding="utf-8")):
            if text.strip():
                yield json.loads(text)


BAD_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    1.0,
    1.5,
    -1,
    "",
    " ",
    "x",
    "x\n",
    "\t",
    [],
    [""],
    ["x"],
    [1],
    [None],
    {},
    {"role": "user"},
    [{"role": "user", "content": "hi"}],
    [{"role": "bot", "content": "hi"}],
    [{"role": "user", "content": ""}],
    [{"role": "user", "content": "hi", "extra": 1}],
    ["public"],
    ["root"],
    ["public", 1],
    "easy",
    "medum",
    "2026-04-01",
    "2026/04/01",
    "sample:hr/onboarding.md#1",
    ["sample:hr/onboarding.md#1"],
    ["sample:hr/onboarding.md"],
    ["hr onboarding"],
    ["Hr"],
    ["multi-turn"],
    "a" * 65,
    10**20,
    -0.0,
    2.0,
]


def broken_cases() -> Iterator[dict[str, Any]]:
    base = valid_case()
    multi = valid_case(
        "t-002",
        history=[{"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好"}],
        golden_rewrite="新员工入职需要带什么？",
    )
    for case in (base, multi):
        for name in CASE_FIELDS:
            without = copy.deepcopy(case)
            without.pop(name, None)
            yield without
            for value in BAD_VALUES:
                changed = copy.deepcopy(case)
                changed[name] = value
                yield changed
        yield {**case, "qestion": "typo"}
        yield {**case, "notes": "unknown"}
        yield {
            **case,
            "history": [
                {"role": "user", "content": "x"},
                {"role": "assistant", "content": "y"},
                "z",
            ],
        }


@pytest.mark.parametrize("case", list(shipped_cases()), ids=lambda c: str(c.get("id")))
def test_shipped_cases_agree(case: dict[str, Any]) -> None:
    assert schema_ok(case) is True
    assert pydantic_ok(case) is True


def test_broken_cases_agree() -> None:
    disagreements = []
    n = 0
    for case in broken_cases():
        n += 1
        if schema_ok(case) != pydantic_ok(case):
            disagreements.append(
                (
                    schema_ok(case),
                    {k: case.get(k) for k in case if case.get(k) != valid_case().get(k)},
                )
            )
    assert n > 1000
    assert disagreements == []


def test_schema_and_model_list_the_same_fields() -> None:
    assert set(schema()["properties"]) == set(CASE_FIELDS)
    assert set(schema()["required"]) == {
        name for name, f in Case.model_fields.items() if f.is_required()
    }


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
    | st.sampled_from(
        [
            "public",
            "employee",
            "easy",
            "hard",
            "user",
            "assistant",
            "hr",
            "sample:hr/onboarding.md#1",
        ]
    ),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["role", "content", "x"]), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.dictionaries(st.sampled_from([*CASE_FIELDS, "extra"]), json_values, max_size=3),
    drop=st.lists(st.sampled_from(list(CASE_FIELDS)), max_size=2),
)
def test_random_cases_agree(changes: dict[str, Any], drop: list[str]) -> None:
    case = valid_case()
    for name in drop:
        case.pop(name, None)
    case.update(changes)
    assert schema_ok(case) == pydantic_ok(case)
