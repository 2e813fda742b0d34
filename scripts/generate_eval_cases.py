#!/usr/bin/env python
"""Generate candidate evaluation cases from KB chunks (seed 004 §8.2, path A).

    .venv/bin/python scripts/generate_eval_cases.py --provider anthropic:claude-opus-4-7 \\
        [--kb tests/eval/kb/sample] [--acl employee] [--limit 20] [--out FILE]

Runs the generation prompt below over each chunk with the configured provider (through
``app.llm.engine.Engine``: cache, retries, rate limits and cost as everywhere else) and
writes the candidates to a *review file* — never into a suite. A deterministic 30 % of
the candidates is marked ``needs_review: true``; a person reviews those first and, per seed
004 §8.2, stops the batch if their quality is poor. Accepted candidates are then copied
into a new suite version by hand (with ids, tags, must_include and a CHANGELOG entry) and
checked with ``rag datasets check``.

Refuses to run without ``--provider``: synthetic cases from an unnamed model cannot be
traced. By default only chunks a ``public``/``employee`` reader may see are used, so
restricted material (salary bands, board minutes, audit findings) never leaks into
generated questions.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.eval.datasets.case import DIFFICULTIES, FILE_NAME_RE  # noqa: E402
from app.llm.types import ChatRequest, Completion, Message  # noqa: E402
from app.paths import datasets_dir, kb_dir, reports_dir  # noqa: E402
from app.retrieval.kb import Chunk, can_read, load_kb  # noqa: E402

PROMPT = """你是评测集标注员。基于下面的知识库片段，生成 3 个高质量评测问题。
要求：
- 问题必须能从文档中找到答案
- 问题风格贴近真实用户：口语化、可能不完整、可能带歧义
- 至少 1 个问题需要综合 2 个以上信息点
- 输出 JSON: [{{"question": "...", "golden_answer": "...", "difficulty": "easy|medium|hard"}}]
文档片段：
{chunk}
"""
PROMPT_VERSION = "seed004-8.2-pathA-v1"
PROMPT_HASH = "sha256:" + hashlib.sha256(PROMPT.encode("utf-8")).hexdigest()
REVIEW_RATE = 0.30


class Generator(Protocol):
    async def generate(
        self, provider: str, request: ChatRequest, sample_index: int = 0
    ) -> Completion: ...


@dataclass(frozen=True)
class ChunkResult:
    chunk: Chunk
    candidates: list[dict[str, Any]]
    error: str | None = None


def build_request(chunk: Chunk, model: str) -> ChatRequest:
    return ChatRequest(
        model=model,
        system=None,
        messages=(Message("user", PROMPT.format(chunk=chunk.text)),),
        temperature=0.7,
        max_tokens=1500,
        response_format="json",
        prompt_version=PROMPT_VERSION,
        prompt_hash=PROMPT_HASH,
        purpose="other",
        variables={"chunk": chunk.text},
    )


def parse_candidates(text: str) -> list[dict[str, Any]]:
    """The JSON list the prompt asks for; tolerates a ```json fence. Raises ValueError."""
    body = text.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1).strip()
    start, end = body.find("["), body.rfind("]")
    if start < 0 or end < start:
        raise ValueError("no JSON list in the answer")
    data = json.loads(body[start : end + 1])
    if not isinstance(data, list):
        raise ValueError("the answer is not a JSON list")
    items: list[dict[str, Any]] = []
    for item in data:
        if not isinstance(item, dict):
            raise ValueError("a list item is not an object")
        question, answer = item.get("question"), item.get("golden_answer")
        if not isinstance(question, str) or not question.strip():
            raise ValueError("an item has no question")
        if not isinstance(answer, str) or not answer.strip():
            raise ValueError("an item has no golden_answer")
        difficulty = item.get("difficulty")
        items.append(
            {
                "question": question.strip(),
                "golden_answer": answer.strip(),
                "difficulty": difficulty if difficulty in DIFFICULTIES else "medium",
            }
        )
    return items


def reader_acl(chunk: Chunk) -> list[str]:
    """The weakest reader that may see the chunk (the acl a generated case should carry)."""
    if can_read(["public"], chunk.acl):
        return ["public"]
    if can_read(["employee"], chunk.acl):
        return ["employee"]
    return ["employee", chunk.acl[0]]


def candidate_rows(
    results: Sequence[ChunkResult], provider: str, seed: str
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for result in results:
        for n, item in enumerate(result.candidates, start=1):
            digest = hashlib.sha256(
                f"{result.chunk.chunk_id}|{n}|{item['question']}".encode()
            ).hexdigest()
            rows.append(
                {
                    "candidate_id": f"gen-{digest[:10]}",
                    "question": item["question"],
                    "golden_answer": item["golden_answer"],
                    "difficulty": item["difficulty"],
                    "golden_chunk_ids": [result.chunk.chunk_id],
                    "acl": reader_acl(result.chunk),
                    "tags": ["generated", result.chunk.doc_path.split("/", 1)[0]],
                    "annotator": f"llm:{provider}",
                    "source_text": result.chunk.text,
                    "prompt_version": PROMPT_VERSION,
                    "prompt_hash": PROMPT_HASH,
                    "needs_review": False,
                    "review_status": "pending",
                }
            )
    # deterministic review sample: the first ceil(30 %) by a seeded hash of the candidate id
    ranked = sorted(
        rows, key=lambda r: hashlib.sha256(f"{seed}|{r['candidate_id']}".encode()).hexdigest()
    )
    for row in ranked[: math.ceil(len(rows) * REVIEW_RATE)]:
        row["needs_review"] = True
    return rows


async def generate(
    engine: Generator, provider: str, chunks: Sequence[Chunk], model: str, concurrency: int = 4
) -> list[ChunkResult]:
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(chunk: Chunk) -> ChunkResult:
        async with gate:
            try:
                completion = await engine.generate(provider, build_request(chunk, model))
                return ChunkResult(chunk, parse_candidates(completion.text))
            except Exception as exc:  # recorded per chunk; the batch goes on
                return ChunkResult(chunk, [], f"{type(exc).__name__}: {exc}")

    return list(await asyncio.gather(*(one(c) for c in chunks)))


def check_out_path(out: Path) -> None:
    """Refuse to write where a suite lives: candidates go to a review file only."""
    resolved = out.resolve()
    suites = datasets_dir().resolve()
    if FILE_NAME_RE.match(out.name) or resolved.parent == suites or suites in resolved.parents:
        raise SystemExit(
            f"error: {out} looks like a dataset; candidates are written to a review file, never into "
            "a suite — pick a path outside tests/eval/datasets/ (default: reports/candidates/)"
        )


def main(argv: list[str] | None = None, engine: Generator | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--provider", help="provider string, e.g. anthropic:claude-opus-4-7 (required)"
    )
    parser.add_argument(
        "--kb", type=Path, default=None, help="knowledge-base folder (default: the sample KB)"
    )
    parser.add_argument(
        "--acl",
        action="append",
        default=None,
        help="only chunks this reader may see (repeatable; default: employee)",
    )
    parser.add_argument("--limit", type=int, default=None, help="at most N chunks")
    parser.add_argument(
        "--out", type=Path, default=None, help="review file (default: reports/candidates/…)"
    )
    parser.add_argument("--seed", default="0", help="seed of the deterministic 30%% review sample")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    if not args.provider:
        print(
            "error: --provider is required (e.g. --provider anthropic:claude-opus-4-7); generated cases "
            "must name the model that wrote them",
            file=sys.stderr,
        )
        return 2
    from app.llm.providers.families import parse_provider

    try:
        spec = parse_provider(args.provider)
    except Exception as exc:
        print(f"error: --provider {args.provider}: {exc}", file=sys.stderr)
        return 2
    kb = load_kb(args.kb or kb_dir(), name="sample")
    acl = args.acl or ["employee"]
    chunks = [c for c in kb.chunks if can_read(acl, c.acl)]
    if args.limit is not None:
        chunks = chunks[: args.limit]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out: Path = args.out or reports_dir() / "candidates" / f"candidates_{stamp}.jsonl"
    check_out_path(out)

    async def run() -> list[ChunkResult]:
        if engine is not None:
            return await generate(engine, args.provider, chunks, spec.model, args.concurrency)
        from app.llm.engine import Engine, EngineConfig

        async with Engine(EngineConfig(concurrency=args.concurrency)) as real:
            return await generate(real, args.provider, chunks, spec.model, args.concurrency)

    results = asyncio.run(run())
    rows = candidate_rows(results, args.provider, args.seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    errors = [r for r in results if r.error]
    marked = sum(1 for r in rows if r["needs_review"])
    print(f"{len(chunks)} chunk(s) → {len(rows)} candidate(s) in {out}")
    print(
        f"{marked} marked needs_review (30 % sample, seed {args.seed}); review them before using any candidate"
    )
    for r in errors:
        print(f"  {r.chunk.chunk_id}: {r.error}", file=sys.stderr)
    return 1 if errors and not rows else 0


if __name__ == "__main__":
    raise SystemExit(main())
