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


def test_importing_app_text_does_not_load_jieba() -> None:
    import subprocess
    import sys

    code = "import sys, app.text; print('jieba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # loaded lazily, on the first CJK text analysed
