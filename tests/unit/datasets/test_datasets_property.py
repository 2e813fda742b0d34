"""Mutated valid lines: the checker never raises, exits 1 or 2 on a broken line, names the line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from _datasets_support import check, line, schema, valid_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import DatasetError
from app.eval.datasets.case import load_dataset_file
from app.limits import case_problems

VALID = [
    valid_case("p-001"),
    valid_case(
        "p-002",
        question="入职第一天几点到？",
        golden_chunk_ids=["sample:hr/onboarding.md#2"],
        must_include=["9:00"],
    ),
    valid_case(
        "p-003",
        history=[
            {"role": "user", "content": "年假几天？"},
            {"role": "assistant", "content": "5 天起。"},
        ],
        question="能结转吗？",
        golden_rewrite="未休年假能结转吗？",
        golden_chunk_ids=["sample:hr/annual_leave.md#4"],
        must_include=["3 月 31 日"],
        acl=["employee"],
    ),
]
ALPHABET = st.sampled_from(
    [
        *list('{}[]",:\\ \t\r\ufeff\x00aZ0-#é中😀'),
        "true",
        "null",
        "1e999",
        "\ud800",
        "\\ud800",
        "，",
        "“",
        "\u3000",
    ]
)


@st.composite
def mutated_line(draw: st.DrawFn) -> tuple[int, str]:
    """(index of the base case, mutated text) — mutations never add a line break."""
    index = draw(st.integers(0, len(VALID) - 1))
    case: dict[str, Any] = json.loads(json.dumps(VALID[index]))
    kind = draw(
        st.sampled_from(
            [
                "delete-char",
                "replace-char",
                "duplicate-char",
                "insert-char",
                "delete-field",
                "duplicate-field",
                "replace-field",
                "rename-field",
            ]
        )
    )
    if kind.endswith("field"):
        name = draw(st.sampled_from(sorted(case)))
        if kind == "delete-field":
            del case[name]
        elif kind == "replace-field":
            case[name] = draw(
                st.none()
                | st.booleans()
                | st.integers()
                | st.text(max_size=4)
                | st.lists(st.text(max_size=3), max_size=2)
            )
        elif kind == "rename-field":
            case[name + draw(st.sampled_from(["s", "_", "x"]))] = case.pop(name)
        text = json.dumps(case, ensure_ascii=draw(st.booleans()))
        if kind == "duplicate-field":
            text = (
                text[:-1] + f", {json.dumps(name)}: {json.dumps(case[name], ensure_ascii=False)}}}"
            )
        return index, text
    text = line(case)
    pos = draw(st.integers(0, len(text) - 1))
    char = draw(ALPHABET)
    if kind == "delete-char":
        text = text[:pos] + text[pos + 1 :]
    elif kind == "replace-char":
        text = text[:pos] + char + text[pos + 1 :]
    elif kind == "duplicate-char":
        text = text[:pos] + text[pos] + text[pos:]
    else:
        text = text[:pos] + char + text[pos:]
    return index, text


def is_broken(text: str) -> bool:
    """A line that is not one schema-valid JSON object (the oracle, independent of the checker)."""
    try:
        obj = json.loads(text)
    except ValueError:
        return True
    return not jsonschema.Draft202012Validator(schema()).is_valid(obj)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(mutation=mutated_line(), position=st.integers(0, 2))
def test_mutated_line_is_reported(tmp_path: Path, mutation: tuple[int, str], position: int) -> None:
    _index, text = mutation
    others = [line(valid_case(f"q-{n}")) for n in range(2)]
    rows = [*others[:position], text, *others[position:]]
    path = tmp_path / "mutated_v1.0.jsonl"
    path.write_bytes(("\n".join(rows) + "\n").encode("utf-8", "surrogatepass"))
    line_no = position + 1

    result = check(path)  # never raises

    assert result.exit_code in (0, 1, 2)
    for issue in result.issues:
        assert issue.line is not None, issue.format()  # every problem in this file names a line
        assert issue.format()  # and can be printed
    mutated_issues = [i for i in result.issues if i.line == line_no]
    seen = text.removesuffix("\r")  # what the checker parses: CRLF and a first-line BOM tolerated
    if line_no == 1:
        seen = seen.removeprefix("\ufeff")
    broken = "\ud800" in text or is_broken(seen)
    if broken:
        assert result.exit_code in (1, 2)
        assert any(i.severity == "error" for i in mutated_issues), [
            i.format() for i in result.issues
        ]
    # the check refuses everything the loader refuses (a lone surrogate once passed the
    # check and crashed `rag eval run`)
    try:
        load_dataset_file(path)
    except DatasetError:
        assert result.exit_code in (1, 2), [i.format() for i in result.issues]
    # the untouched lines are never blamed for errors
    blamed = {i.line for i in result.issues if i.severity == "error"}
    assert blamed <= {line_no}, [i.format() for i in result.issues]


_CODE_POINTS = st.one_of(
    st.integers(0xD7F0, 0xE010),  # around and inside the surrogate range
    st.integers(0x20, 0x7E),
    st.sampled_from([0x4E2D, 0x1F600, 0x5C, 0x22]),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_CODE_POINTS, max_size=12),
    st.booleans(),
    st.booleans(),
)
def test_the_surrogate_fast_path_finds_what_the_walk_finds(
    points: list[int], in_key: bool, upper: bool
) -> None:
    """case_problems(obj, line) skips the walk over every string when the line has no
    surrogate escape: on lines written with escapes (upper or lower case, in a key or a value,
    after an escaped backslash or not) it reports exactly what the full walk reports."""
    text = "".join(chr(p) for p in points)
    raw = json.dumps({text: 1} if in_key else {"question": "q", "notes": [text]})
    if upper:
        raw = raw.replace("\\ud", "\\uD")
    obj = json.loads(raw)
    assert case_problems(obj, raw) == case_problems(obj)
