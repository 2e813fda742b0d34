"""Property-based fuzzing of each command's input path (issue 13 §4).

The invariant, for every generated input: the real entry point (``app.cli.main``) ends with
exit code 0, 1 or 2, no traceback reaches stderr (the ``rag`` fixture asserts it) and it
finishes within the fixture's alarm. Examples are bounded so the module stays well inside
its share of ``make test``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[3]
PROMPTS = ROOT / "app" / "generation" / "prompts"
LINE = (ROOT / "tests/eval/datasets/smoke_v1.0.jsonl").read_text(encoding="utf-8").splitlines()[0]
CASE = json.loads(LINE)
MODULE = "system/kb_qa_v2.py"
SOURCE = (PROMPTS / MODULE).read_text(encoding="utf-8")

FUZZ = settings(
    max_examples=20,
    deadline=None,  # time is bounded by the rag fixture's alarm, not per example
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,  # the same examples every run: a failure reproduces
)

# JSON values that have broken parsers before: non-finite numbers, deep nesting, surrogates
hostile_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
    | st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", '"\\ud800"', "[" * 3000]),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


def _json_literal(value: Any) -> str:
    if isinstance(value, str) and value in {"NaN", "Infinity", "-Infinity", "1e999"}:
        return value  # the non-JSON literal itself
    if isinstance(value, str) and (value.startswith("[") or value.startswith('"\\u')):
        return value
    return json.dumps(value, ensure_ascii=False)


@st.composite
def mutated_bytes(draw: st.DrawFn, base: bytes) -> bytes:
    """``base`` with a few byte-level edits: flips, inserts, deletes, truncation."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "flip" and data:
            data[pos] = draw(st.integers(0, 255))
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete" and data:
            del data[pos : pos + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[pos:]
    return bytes(data)


def _ok(code: int) -> None:
    assert code in (0, 1, 2)


# ----------------------------------------------------------------------------- datasets
@FUZZ
@given(
    field=st.sampled_from(sorted(CASE)),
    value=hostile_json,
    raw=mutated_bytes(LINE.encode()),
)
def test_datasets_check_on_mutated_jsonl(
    rag: Callable[..., Any], tmp_path: Path, field: str, value: Any, raw: bytes
) -> None:
    body = dict(CASE)
    body.pop(field)
    edited = json.dumps(body, ensure_ascii=False)[:-1] + f', "{field}": {_json_literal(value)}}}'
    f = tmp_path / "fuzz_v1.0.jsonl"
    f.write_bytes(edited.encode("utf-8", "surrogatepass") + b"\n" + raw + b"\n")
    r = rag("datasets", "check", str(f))
    _ok(r.code)
    assert r.code != 0 or "error" not in r.out.splitlines()[-1]


# ----------------------------------------------------------------------------- prompt modules
TEMPLATE_PIECES = st.lists(
    st.sampled_from(
        ["{", "}", "{{", "}}", "{question", ":", "!", "r", "z", ">", "=", "^", "9" * 12, ",",
         ".", "%", "{0}", "{}", "[0]", ".x", "{question}", "问题", " "]
    ),
    min_size=1,
    max_size=8,
).map("".join)  # fmt: skip
STATEMENTS = st.one_of(
    hostile_json.map(lambda v: f"EXTRA = {v!r}"),
    st.integers(1, 400).map(lambda n: "EXTRA = " + " + ".join(['"a"'] * n)),
    st.integers(1, 60).map(lambda n: "EXTRA = " + "[" * n + "]" * n),
    st.sampled_from(
        ['DEFAULTS = {["company_name"]: "x"}', "EXTRA = {[1]}", "import os", "EXTRA = f'{1}'",
         "EXTRA = (", "VERSION = 2", "APPLICABLE_MODELS = 'x'", "TEST_FIXTURES = [1]"]
    ),
)  # fmt: skip


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "prompts"
    shutil.copytree(PROMPTS, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


RENDER = ["-m", "claude-sonnet-4-6", "--var", "question=q", "--var", "context=c"]


@FUZZ
@given(
    piece=TEMPLATE_PIECES,
    stmt=STATEMENTS,
    raw=st.none() | mutated_bytes(SOURCE.encode()[:1500]),
)
def test_prompts_check_then_render_on_mutated_modules(
    rag: Callable[..., Any], tree: Path, piece: str, stmt: str, raw: bytes | None
) -> None:
    module = tree / MODULE
    if raw is None:
        module.write_text(SOURCE.replace("{question}", piece, 1) + "\n" + stmt + "\n", "utf-8")
    else:
        module.write_bytes(raw + SOURCE.encode()[1500:])
    check = rag("prompts", "check", "--root", str(tree))
    _ok(check.code)
    render = rag("prompts", "render", "system/kb_qa", *RENDER, "--root", str(tree))
    assert render.code in (0, 2)  # render either renders or refuses; never a crash
    if check.code == 0:  # check passed: render must not refuse on the template itself
        assert "cannot be rendered" not in render.err and "does not render" not in render.err


# ----------------------------------------------------------------------------- history
turn = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "", 1]), "content": hostile_json}
)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
@given(
    turns=st.lists(turn, max_size=4),
    raw=st.none() | mutated_bytes(b'[{"role": "user", "content": "\xe5\xb9\xb4\xe5\x81\x87"}]'),
)
def test_ask_on_mutated_history(
    rag: Callable[..., Any], tmp_path: Path, turns: list[dict[str, Any]], raw: bytes | None
) -> None:
    h = tmp_path / "history.json"
    if raw is None:
        h.write_text(
            "[" + ", ".join(
                f'{{"role": {json.dumps(t["role"])}, "content": {_json_literal(t["content"])}}}'
                for t in turns
            ) + "]",
            "utf-8",
            errors="surrogatepass",
        )  # fmt: skip
    else:
        h.write_bytes(raw)
    r = rag(
        "ask", "--retriever", "bm25", "--history", str(h), "年假有几天？"
    )  # the input path, not the embedder
    _ok(r.code)


# ----------------------------------------------------------------------------- reports
@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real report (2 smoke cases on the offline providers), made once for the module."""
    from app.cli import main

    out = tmp_path_factory.mktemp("reports")
    with pytest.raises(SystemExit):
        main(["eval", "run", "--suite", "smoke", "--limit", "2", "--out", str(out)])
    return next(out.glob("eval_*.json"))


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _leaves(v, (*path, i))]
    return [path]


@FUZZ
@given(
    picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=4),
    values=st.lists(hostile_json, min_size=4, max_size=4),
    raw=st.booleans(),
    edits=st.data(),
)
def test_eval_compare_on_mutated_reports(
    rag: Callable[..., Any],
    smoke_report: Path,
    tmp_path: Path,
    picks: list[int],
    values: list[Any],
    raw: bool,
    edits: st.DataObject,
) -> None:
    text = smoke_report.read_text("utf-8")
    if raw:
        body = edits.draw(mutated_bytes(text.encode()))
    else:
        data = json.loads(text)
        leaves = _leaves(data)
        marks = {}
        for n, (pick, value) in enumerate(zip(picks, values, strict=False)):
            path = leaves[pick % len(leaves)]
            target = data
            for key in path[:-1]:
                target = target[key]
            if path:
                target[path[-1]] = f"@@{n}@@"
                marks[f'"@@{n}@@"'] = _json_literal(value)
        out = json.dumps(data, ensure_ascii=False)
        for mark, literal in marks.items():
            out = out.replace(mark, literal)
        body = out.encode("utf-8", "surrogatepass")
    new = tmp_path / "eval_new.json"
    new.write_bytes(body)
    r = rag("eval", "compare", str(smoke_report), str(new))
    _ok(r.code)
