"""Benchmark: discover + check 200 generated prompt modules (target < 0.5 s on this machine).

Copies real modules of the shipped library under new slugs into a temporary tree (with a
releases.toml and prompts.lock for them), then times ``build_registry(root).check()``.
Prints the best of several runs and its ratio to the target; exit 1 when over the target.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchrows import row  # noqa: E402  (scripts/, on sys.path when run as a script)

from app.generation.registry import build_registry, default_root  # noqa: E402
from app.generation.registry.loader import content_hash  # noqa: E402
from app.generation.registry.releases import write_lock  # noqa: E402

TARGET_S = 0.5
N_MODULES = 200
RUNS = 5


def generate(root: Path) -> None:
    sources = sorted(default_root().glob("*/*_v1.py"))
    releases: list[str] = []
    hashes: dict[str, str] = {}
    for i in range(N_MODULES):
        src = sources[i % len(sources)]
        category, name = src.parent.name, src.stem
        slug = f"{name.removesuffix('_v1')}_{i:03d}"
        text = src.read_text(encoding="utf-8").replace(
            f'VERSION = "{name}"', f'VERSION = "{slug}_v1"'
        )
        dest = root / category / f"{slug}_v1.py"
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        releases.append(f'[prompts."{category}/{slug}"]\nactive = "v1"\nfallback = "v1"\n')
        hashes[f"{category}/{slug}_v1"] = content_hash(dest.read_bytes())
    (root / "releases.toml").write_text("\n".join(releases), encoding="utf-8")
    write_lock(root, hashes)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate(root)
        times = []
        for _ in range(RUNS):
            start = time.perf_counter()
            reg = build_registry(root)
            violations = reg.check()
            times.append(time.perf_counter() - start)
        if violations:
            print(f"unexpected violations in the generated tree: {violations[0].format()}")
            return 1
        best = min(times)
        print(
            f"registry: discover+check {len(reg.modules)} prompt modules: best {best:.3f} s "
            f"(median {sorted(times)[RUNS // 2]:.3f} s over {RUNS} runs); target {TARGET_S} s; "
            f"ratio {best / TARGET_S:.2f} of target"
        )
        row(
            "registry",
            f"discover + check {len(reg.modules)} prompt modules (best of {RUNS})",
            f"< {TARGET_S} s",
            f"{best:.3f} s",
            best < TARGET_S,
            best / TARGET_S,
        )
        return 0 if best < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
