"""Every file under ``app/`` that the code reads at run time reaches an installed wheel.

setuptools ships ``.py`` files of packages only; anything else (the shipped vectors, the
thresholds, templates, the prompt lock) reaches a wheel only through a
``[tool.setuptools.package-data]`` pattern. A new data file without a pattern works from the
checkout (an editable install) and is missing from a built wheel — this test names it.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _package_data() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data: dict[str, list[str]] = config["tool"]["setuptools"]["package-data"]
    return data


def _packaged(rel: str, data: dict[str, list[str]]) -> bool:
    """``rel`` (``app/x/y/f.ext``) matches a pattern of one of its enclosing packages.

    A pattern is relative to its package's folder, as setuptools reads it; ``"*"`` applies to
    every package (the folder that holds the file must then be a package itself).
    """
    path = ROOT / rel
    parts = Path(rel).parts
    for depth in range(len(parts) - 1, 0, -1):
        package_dir = ROOT.joinpath(*parts[:depth])
        if not (package_dir / "__init__.py").is_file():
            continue
        inside = "/".join(parts[depth:])
        name = ".".join(parts[:depth])
        patterns = list(data.get(name, []))
        if depth == len(parts) - 1:  # "*" reaches files directly inside a package
            patterns += data.get("*", [])
        if any(fnmatch.fnmatch(inside, p) and inside.count("/") == p.count("/") for p in patterns):
            return path.is_file()
    return False


def _tracked_data_files() -> list[str]:
    """Files under ``app/`` (the folder, not git: the recipe tests run this on a scratch copy
    that is no repository), byte-code and per-process caches left out."""
    out = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "app").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]
    return [f for f in out if not f.endswith(".py") or "/prompts/" in f]


def test_every_data_file_under_app_is_covered_by_package_data() -> None:
    data = _package_data()
    files = _tracked_data_files()
    assert any(f.endswith(".npz") for f in files)  # the shipped vectors are among them
    missing = [f for f in files if not _packaged(f, data)]
    assert missing == [], f"add a [tool.setuptools.package-data] pattern for: {missing}"


def test_the_check_fails_for_a_file_no_pattern_covers() -> None:
    data = _package_data()
    assert _packaged("app/retrieval/vectors/x.npz", data) is False  # not on disk
    real = "app/retrieval/hybrid_calibration.json"
    assert _packaged(real, data)
    assert not _packaged(real, {"app.view": ["*.json"]})


def test_build_backend_reads_the_license_expression() -> None:
    """``license = "Apache-2.0"`` (PEP 639) needs setuptools ≥ 77; older ones refuse the build."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert isinstance(config["project"]["license"], str)
    requires = config["build-system"]["requires"]
    pins = [r for r in requires if r.replace(" ", "").startswith("setuptools>=")]
    assert pins, requires
    major = int(pins[0].split(">=")[1].split(".")[0])
    assert major >= 77, requires
