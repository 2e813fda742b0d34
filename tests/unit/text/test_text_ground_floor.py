"""app.text is the ground floor: its modules import nothing from app but app.errors,
app.text itself and the ground floor's file writer (app.safe_io, which imports only
app.errors and app.wellformed) — read statically, every import, also those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

TEXT = Path(__file__).resolve().parents[3] / "app" / "text"


def _app_imports(path: Path) -> set[str]:
    mods: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            mods.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module)
    return {m for m in mods if m.startswith("app")}


def test_app_text_imports_only_the_ground_floor() -> None:
    allowed = ("app.text", "app.errors", "app.safe_io")
    seen = {
        path.name: {m for m in _app_imports(path) if not m.startswith(allowed)}
        for path in sorted(TEXT.glob("*.py"))
    }
    assert len(seen) >= 7
    assert {name: mods for name, mods in seen.items() if mods} == {}
    for name in ("safe_io.py", "wellformed.py"):
        assert _app_imports(TEXT.parent / name) <= {"app.errors", "app.wellformed"}, name


def test_importing_app_text_does_not_load_jieba() -> None:
    import subprocess
    import sys

    code = "import sys, app.text; print('jieba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"  # loaded lazily, on the first CJK text analysed
