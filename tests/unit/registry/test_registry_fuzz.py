"""Property: whatever a prompt author types, `check` reports violations — it never raises.

Hypothesis mutates a real module's source (deletes, replaces or duplicates slices of
characters and lines) and the releases file; `check_registry` must return a list of
violations (each naming the file) and never let an exception escape.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.generation.registry import check_registry
from app.paths import prompts_dir

SOURCE = (prompts_dir() / "system" / "kb_qa_v2.py").read_text(encoding="utf-8")


@st.composite
def mutated(draw: st.DrawFn, text: str) -> str:
    for _ in range(draw(st.integers(1, 4))):
        if not text:
            break
        i = draw(st.integers(0, len(text) - 1))
        j = draw(st.integers(i, min(len(text), i + 40)))
        op = draw(st.sampled_from(["delete", "replace", "duplicate"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "replace":
            text = text[:i] + draw(st.text(max_size=12)) + text[j:]
        else:
            text = text[:j] + text[i:j] + text[j:]
    return text


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(source=mutated(SOURCE))
def test_check_never_raises_on_a_mutated_module(source: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "prompts"
        shutil.copytree(prompts_dir(), root)
        (root / "system" / "kb_qa_v2.py").write_text(source, encoding="utf-8")
        violations = check_registry(root)
    assert isinstance(violations, list)
    if source != SOURCE:
        # an edit of a locked, released module is always caught (P016 at least)
        assert any(v.file == "system/kb_qa_v2.py" for v in violations)
    assert all(v.code.startswith("P") and v.file for v in violations)
