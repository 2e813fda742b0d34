"""`rag prompts check` fails on a header 评测基线 line that no recorded baseline backs (P026)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from app.paths import prompts_dir


def test_an_unbacked_header_baseline_fails_the_check(tmp_path: Path) -> None:
    root = tmp_path / "prompts"
    shutil.copytree(prompts_dir(), root)
    module = root / "system" / "kb_qa_v2.py"
    lines = module.read_text(encoding="utf-8").split("\n")
    end = lines.index('"""', 1)  # the closing line of the docstring header
    lines[end:end] = ["评测基线:", "- smoke set: faithfulness=4.35, correctness=4.20 (2026-05-10)"]
    module.write_text("\n".join(lines), encoding="utf-8")
    baseline_line = end + 2  # 1-based line of "- smoke set: …"

    result = subprocess.run(
        [sys.executable, "-m", "app", "prompts", "check", "--root", str(root), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "RAG_ROOT": str(tmp_path)},  # no reports/baselines here
    )
    assert result.returncode == 1, result.stderr
    found = json.loads(result.stdout)["violations"]
    p026 = [v for v in found if v["code"] == "P026"]
    assert len(p026) == 1
    assert p026[0]["file"] == "system/kb_qa_v2.py"
    assert p026[0]["line"] == baseline_line
    assert "rag eval baseline" in p026[0]["fix"]
