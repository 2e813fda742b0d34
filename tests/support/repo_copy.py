"""A copy of the repository as a fresh clone has it (plus this work tree's edits), and a
``rag`` command that runs the copy's own code, for tests that follow documented commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def copy_repo(dest: Path) -> Path:
    """Copy every tracked and every untracked, not ignored file of the work tree to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in listed:
        rel = raw.decode()
        src = ROOT / rel
        if rel and src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(src.read_bytes())
            target.chmod(src.stat().st_mode)
    return dest


def share_embeddings(copy: Path) -> Path:
    """Link ``copy``'s vector cache (``.cache/embeddings``, where a copy's own code keeps its
    vectors) to this work tree's, so a copy does not embed the sample KB again (≈ 30 s CPU a
    copy). A vector is a pure function of (model, side, text), so the runs compute the same
    floats either way; the first embedding of a fresh cache is proved where the work tree's
    cache is filled (tests/unit/retrieval/test_dense.py, and the first run of the suite that
    needs the vectors)."""
    from app.retrieval.embed import embeddings_cache_dir

    shared = embeddings_cache_dir()
    shared.mkdir(parents=True, exist_ok=True)
    link = copy / ".cache" / "embeddings"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(shared, target_is_directory=True)
    return link


def rag_shim(copy: Path, bin_dir: Path) -> Path:
    """A ``rag`` executable in ``bin_dir`` that runs ``copy``'s ``app`` with this Python."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    shim = bin_dir / "rag"
    shim.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path.insert(0, {str(copy)!r})\n"
        "from app.cli import main\n"
        "main()\n",
        encoding="utf-8",
    )
    shim.chmod(0o755)
    return shim


def clean_env(copy: Path, bin_dir: Path) -> dict[str, str]:
    """The caller's environment without ``RAG_*`` / keys, with ``bin_dir`` first on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RAG_", "LANGFUSE_")) and not k.endswith("_API_KEY")
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["RAG_CACHE_DIR"] = str(copy / ".cache")
    env["LANG"] = env["LC_ALL"] = "C.UTF-8"
    return env


def repo_files(root: Path) -> dict[str, bytes]:
    """Every regular file of a repository copy by relative path (caches and links left out):
    what a recipe test diffs to count the files a recipe changed."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file()
        and not p.is_symlink()
        and not {".cache", "__pycache__", ".pytest_cache"} & set(p.relative_to(root).parts)
    }
