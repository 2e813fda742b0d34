"""app.text is the ground floor: its modules import nothing from app but app.errors and
app.text itself (read statically, every import, also those inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

TEXT = Path(__file__).resolve().parents[3] / "app" / "text"


def test_app_text_imports_only_the_ground_floor() -> None:
    seen: dict[str, set[str]] = {}
    for path in sorted(TEXT.glob("*.py")):
        mods: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                mods.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                mods.add(node.module)
        seen[path.name] = {
            m for m in mods if m.startswith("app") and not m.startswith(("app.text", "app.errors"))
        }
    assert len(seen) >= 7
    assert {name: mods for name, mods in seen.items() if mods} == {}
