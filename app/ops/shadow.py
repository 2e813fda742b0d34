"""Shadow replay (seed 004 §4.3 "预发跑 24h 全量影子流量，不切线上，只对比答案").

Each logged answer's question is asked again, with its reader ACL and its history, through a
candidate pipeline (another prompt version and/or model); the new answer is compared with the
logged one. No golden labels: the comparison is between two answers to the same traffic —

* ``changed``: the answer text differs (after whitespace/width normalisation);
* ``newly_refused`` / ``newly_answered``: the refusal flipped (refusal modes or a rejection
  keyword substitution);
* ``citations_changed``: the set of cited chunk ids differs;
* tokens and latency, old vs new (means and P50/P95).

Records written before the log carried the answer text or the history are replayed without
what they lack and counted under ``missing``; the summary says so instead of guessing.
"""

from __future__ import annotations

import asyncio
import statistics
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.ops.logs import AnswerLog, AnswerRecord
from app.text import compact

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ShadowItem:
    trace_id: str
    question: str
    acl: list[str]
    history_turns: int
    logged_mode: str
    new_mode: str
    logged_answer: str | None
    new_answer: str
    changed: bool | None  # None: the log has no answer text to compare
    newly_refused: bool
    newly_answered: bool
    logged_citations: list[str]
    new_citations: list[str]
    citations_changed: bool
    logged_tokens: int | None
    new_tokens: int
    logged_latency_ms: float
    new_latency_ms: float
    logged_prompt: str | None
    new_prompt: str | None
    error: str | None = None


@dataclass
class ShadowReport:
    run_id: str
    created_at: str
    source: str
    candidate: dict[str, Any]
    items: list[ShadowItem] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        ok = [i for i in self.items if i.error is None]
        comparable = [i for i in ok if i.changed is not None]

        def share(n: int, d: int) -> float | None:
            return round(n / d, 4) if d else None

        def dist(values: Sequence[float]) -> dict[str, float | None]:
            if not values:
                return {"mean": None, "p50": None, "p95": None}
            ordered = sorted(values)
            return {
                "mean": round(statistics.fmean(ordered), 2),
                "p50": round(ordered[(len(ordered) - 1) // 2], 2),
                "p95": round(ordered[max(0, -(-95 * len(ordered) // 100) - 1)], 2),
            }

        changed = sum(1 for i in comparable if i.changed)
        refused = sum(1 for i in ok if i.newly_refused)
        answered = sum(1 for i in ok if i.newly_answered)
        cites = sum(1 for i in ok if i.citations_changed)
        old_tokens = [float(i.logged_tokens) for i in ok if i.logged_tokens is not None]
        return {
            "replayed": len(self.items),
            "errors": len(self.items) - len(ok),
            "compared": len(comparable),
            "missing_answer_text": len(ok) - len(comparable),
            "changed": changed,
            "changed_share": share(changed, len(comparable)),
            "newly_refused": refused,
            "newly_refused_share": share(refused, len(ok)),
            "newly_answered": answered,
            "citations_changed": cites,
            "citations_changed_share": share(cites, len(ok)),
            "tokens": {"logged": dist(old_tokens), "new": dist([float(i.new_tokens) for i in ok])},
            "latency_ms": {
                "logged": dist([i.logged_latency_ms for i in ok]),
                "new": dist([i.new_latency_ms for i in ok]),
            },
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": "shadow",
            "run_id": self.run_id,
            "created_at": self.created_at,
            "source": self.source,
            "candidate": self.candidate,
            "summary": self.summary(),
            "items": [asdict(i) for i in self.items],
        }


def _same(a: str, b: str) -> bool:
    return compact(a) == compact(b)  # width and whitespace, case kept (app.text.normalise)


def _total_tokens(tokens: dict[str, int]) -> int | None:
    if not tokens:
        return None
    return int(tokens.get("input", 0)) + int(tokens.get("output", 0))


async def replay(
    log: AnswerLog,
    pipeline: Any,
    *,
    candidate: dict[str, Any],
    concurrency: int = 4,
    limit: int | None = None,
) -> ShadowReport:
    """Replay every answer record of ``log`` through ``pipeline`` (an ``answer()``-able
    :class:`app.generation.pipeline.Pipeline`), at most ``concurrency`` at once."""
    from app.errors import RuntimeFailure

    records = log.answers[:limit] if limit else list(log.answers)
    report = ShadowReport(
        run_id=uuid.uuid4().hex[:12],
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        source=str(log.path),
        candidate=candidate,
    )
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(rec: AnswerRecord) -> ShadowItem:
        history = [t.model_dump() for t in (rec.history or [])]
        async with gate:
            try:
                ans = await pipeline.answer(rec.question, history, rec.user_acl)
                error = None
            except RuntimeFailure as exc:  # a provider failure is this item's error
                ans, error = None, str(exc)
        logged_cites = rec.cited
        if ans is None:
            return ShadowItem(
                trace_id=rec.trace_id,
                question=rec.question,
                acl=list(rec.user_acl),
                history_turns=len(history),
                logged_mode=rec.mode,
                new_mode="error",
                logged_answer=rec.answer,
                new_answer="",
                changed=None,
                newly_refused=False,
                newly_answered=False,
                logged_citations=logged_cites,
                new_citations=[],
                citations_changed=False,
                logged_tokens=_total_tokens(rec.tokens),
                new_tokens=0,
                logged_latency_ms=rec.latency_ms,
                new_latency_ms=0.0,
                logged_prompt=rec.prompt_version,
                new_prompt=None,
                error=error,
            )
        t = ans.trace
        new_refused = ans.refused  # app.text.answer_refused, as the log's `refused`
        new_cites = [c.chunk_id for c in ans.citations]
        return ShadowItem(
            trace_id=rec.trace_id,
            question=rec.question,
            acl=list(rec.user_acl),
            history_turns=len(history),
            logged_mode=rec.mode,
            new_mode=t.mode,
            logged_answer=rec.answer,
            new_answer=ans.text,
            changed=None if rec.answer is None else not _same(rec.answer, ans.text),
            newly_refused=new_refused and not rec.refused,
            newly_answered=rec.refused and not new_refused,
            logged_citations=logged_cites,
            new_citations=new_cites,
            citations_changed=sorted(set(logged_cites)) != sorted(set(new_cites)),
            logged_tokens=_total_tokens(rec.tokens),
            new_tokens=t.tokens.input + t.tokens.output,
            logged_latency_ms=rec.latency_ms,
            new_latency_ms=t.latency_ms,
            logged_prompt=rec.prompt_version,
            new_prompt=t.prompt_version,
        )

    report.items = list(await asyncio.gather(*(one(r) for r in records)))
    return report


def markdown(report: ShadowReport, *, show: int = 10) -> str:
    s = report.summary()

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:.1f} %"

    cand = report.candidate
    lines = [
        f"## Shadow replay of {s['replayed']} logged answers",
        "",
        f"candidate: prompt `{cand.get('prompt')}` · model `{cand.get('model')}`"
        + (" (an offline baseline, not a model)" if cand.get("offline") else ""),
        "",
        "| | count | share |",
        "|---|---:|---:|",
        f"| answers changed | {s['changed']} of {s['compared']} | {pct(s['changed_share'])} |",
        f"| newly refused | {s['newly_refused']} | {pct(s['newly_refused_share'])} |",
        f"| newly answered | {s['newly_answered']} | |",
        f"| citations changed | {s['citations_changed']} | {pct(s['citations_changed_share'])} |",
        f"| errors | {s['errors']} | |",
        "",
        "| | logged mean / p95 | candidate mean / p95 |",
        "|---|---:|---:|",
    ]
    for key, label in (("tokens", "tokens per answer"), ("latency_ms", "latency ms")):
        old, new = s[key]["logged"], s[key]["new"]
        lines.append(f"| {label} | {old['mean']} / {old['p95']} | {new['mean']} / {new['p95']} |")
    if cand.get("offline"):
        lines += [
            "",
            f"Note: `{cand.get('model')}` is a deterministic baseline that does not read the "
            "prompt's wording, so an unchanged answer here says nothing about a wording change. "
            "Replay with a model to see it: `--model openai:<model>@<base_url>` (any "
            "OpenAI-compatible server) or `--model anthropic:<model>`.",
        ]
    if s["missing_answer_text"]:
        lines += [
            "",
            f"{s['missing_answer_text']} logged record(s) carry no answer text (written before "
            "the log recorded it): replayed, but not counted as changed or unchanged.",
        ]
    flagged = [i for i in report.items if i.newly_refused or i.changed or i.error]
    if flagged:
        lines += ["", f"First {min(show, len(flagged))} of {len(flagged)} changed items:", ""]
        for i in flagged[:show]:
            tag = (
                "error"
                if i.error
                else "newly refused"
                if i.newly_refused
                else "newly answered"
                if i.newly_answered
                else "changed"
            )
            lines.append(f"- `{i.trace_id}` {tag}: {i.question[:60]}")
    return "\n".join(lines) + "\n"


def write_report(report: ShadowReport, out_dir: Path) -> Path:
    import json

    from app.safe_io import atomic_write_text

    path = (
        out_dir
        / f"shadow_{report.created_at.replace(':', '').replace('-', '')}_{report.run_id}.json"
    )
    text = json.dumps(report.to_json(), ensure_ascii=False, indent=2, allow_nan=False)
    atomic_write_text(path, text)
    return path
