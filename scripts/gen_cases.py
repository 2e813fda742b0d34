"""Write a deterministic N-case dataset (10,000 … 100,000: "a day of shadow traffic") from
every shipped suite, outside tests/eval/datasets.

    python scripts/gen_cases.py --cases 100000 [--vary] [--seed 0] [--out .cache/gen]

prints the path of the ``gen_v1.0.jsonl`` it wrote (run it with
``rag eval run --dataset PATH``). Case *i* is a case of ``smoke``, ``full``, ``hard`` or
``adversarial`` (single- and multi-turn, refusals, ACL and injection cases alike) drawn by a
seeded shuffle that goes through every shipped case before repeating one, under the id
``gen-000001`` …; its golden answer, chunks and checks are the source case's, so every
pipeline stage and metric does its ordinary work.

``--vary`` rewords a question in one of :data:`VARIANTS` ways per language (a polite prefix,
a trailing "thanks"), as logged traffic would: the same answer, but a text the response
cache and the vector cache have not seen. The variants are few on purpose (at most
``len(VARIANTS) + 1`` texts per shipped question), so a hybrid run embeds a bounded number
of new questions; without ``--vary`` every question's vector is shipped
(``app/retrieval/vectors/``) and a hybrid run embeds nothing. Same arguments, same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("smoke", "full", "hard", "adversarial")

#: (Chinese, English) rewordings: prefix, suffix
VARIANTS: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = (
    (("请问，", ""), ("Hi, ", "")),
    (("", "谢谢！"), ("", " Thanks!")),
    (("麻烦问一下：", ""), ("Quick question: ", "")),
)


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def source_cases() -> list[dict[str, Any]]:
    """Every case of the newest version of each shipped suite, in file order."""
    folder = ROOT / "tests" / "eval" / "datasets"
    rows: list[dict[str, Any]] = []
    for name in SOURCES:
        newest = sorted(folder.glob(f"{name}_v*.jsonl"))[-1]
        rows += [json.loads(x) for x in newest.read_text(encoding="utf-8").splitlines() if x]
    return rows


def _order(n_source: int, n: int, seed: int) -> Iterator[int]:
    rng = random.Random(seed)
    done = 0
    while done < n:
        block = list(range(n_source))
        rng.shuffle(block)
        yield from block[: n - done]
        done += min(n_source, n - done)


def varied(question: str, k: int) -> str:
    """``question`` in rewording ``k`` (0: as it is)."""
    if k == 0:
        return question
    zh, en = VARIANTS[(k - 1) % len(VARIANTS)]
    prefix, suffix = zh if _has_cjk(question) else en
    return f"{prefix}{question}{suffix}"


def generate(n: int, out_dir: Path, *, vary: bool = False, seed: int = 0) -> Path:
    rows = source_cases()
    rng = random.Random(seed + 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "gen_v1.0.jsonl"
    width = max(6, len(str(n)))
    with path.open("w", encoding="utf-8") as fh:
        for i, src in enumerate(_order(len(rows), n, seed), start=1):
            case = dict(rows[src])
            case["id"] = f"gen-{i:0{width}d}"
            if vary:
                case["question"] = varied(case["question"], rng.randrange(len(VARIANTS) + 1))
            fh.write(json.dumps(case, ensure_ascii=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--vary", action="store_true", help="reword questions (few variants)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / ".cache" / "gen")
    args = ap.parse_args(argv)
    if args.cases < 1:
        print("--cases: give a positive number of cases", file=sys.stderr)
        return 2
    print(generate(args.cases, args.out, vary=args.vary, seed=args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
