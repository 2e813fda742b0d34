"""app.limits.case_problems: a lone surrogate anywhere in a case (a value, a key, a list item,
deep inside history) is reported with its field path; a case without one has none (the
walk that builds paths runs only when a string does not encode)."""

from __future__ import annotations

import pytest

from app.limits import case_problems

BASE = {
    "id": "c-1",
    "question": "年假可以结转吗",
    "tags": ["hr", "zh"],
    "history": [{"role": "user", "content": "你好"}, {"role": "assistant", "content": "您好"}],
    "meta": {"note": {"deep": ["a", "b"]}},
}


def _with(path: tuple[object, ...], value: object) -> dict[str, object]:
    import copy

    case = copy.deepcopy(BASE)
    target: object = case
    for step in path[:-1]:
        target = target[step]  # type: ignore[index]
    target[path[-1]] = value  # type: ignore[index]
    return case


def test_a_valid_case_has_no_problem() -> None:
    assert case_problems(BASE) == []
    assert case_problems({**BASE, "n": 3, "flag": True, "none": None}) == []


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (("question",), "question"),
        (("tags", 1), "tags[1]"),
        (("history", 1, "content"), "history[1].content"),
        (("meta", "note", "deep", 0), "meta.note.deep[0]"),
    ],
)
def test_a_lone_surrogate_is_reported_with_its_field(path: tuple[object, ...], field: str) -> None:
    problems = case_problems(_with(path, "ok\ud800x"))
    assert [p[0] for p in problems] == [field]
    assert "lone surrogate '\\ud800' at character 3" in problems[0][1]


def test_a_lone_surrogate_in_a_key_and_in_two_values() -> None:
    case = {**BASE, "\udc00": 1}
    assert [p[0] for p in case_problems(case)] == ["\udc00"]
    two = _with(("question",), "\ud801")
    two["tags"] = ["hr", "\udfff"]
    assert sorted(p[0] for p in case_problems(two)) == ["question", "tags[1]"]
