"""Hard-case candidates mined from an answer log by seed 004 §8.3's four rules.

| rule | seed | here |
|---|---|---|
| ``no_recall`` | 检索返回 0 结果或 top1 score < 0.3 | no chunk retrieved, or top-1 score < 0.3 |
| ``thumbs_down`` | 一周内 ≥ 3 个用户对同类问题打差评 | ≥ 3 distinct users 👎 within any 7-day window on questions of one cluster |
| ``citation_out_of_range`` | validate_citations 检出越界 | the answer cited ``[n]`` outside its documents |
| ``high_latency`` | 单次 P99 > 10s 的对话 | one answer took longer than 10 s |

"Questions of one cluster": the analyser's term sets overlap by Jaccard ≥ 0.5 (single link, in
log order), so "年假有几天" and "年假一共几天？" count together and "报销流程" does not. A user's
latest rating of an answer counts (a 👎 taken back by a 👍 is not a 👎).

Candidates are proposals for review, never cases: they are written under
``reports/candidates/`` (the suites folder is refused), one JSON object a line, with the
evidence, an empty ``golden_answer`` for the expert to fill and ``status: "needs_review"``.
Questions already in a suite are listed as known, not proposed again.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from app.errors import UserError
from app.ops.logs import AnswerLog, AnswerRecord, FeedbackRecord
from app.text import alnum_key

RULES = ("no_recall", "thumbs_down", "citation_out_of_range", "high_latency")
LOW_TOP1 = 0.3
DOWN_USERS = 3
DOWN_WINDOW = timedelta(days=7)
SLOW_MS = 10_000.0
CLUSTER_JACCARD = 0.5


@dataclass(frozen=True)
class MineConfig:
    low_top1: float = LOW_TOP1
    down_users: int = DOWN_USERS
    down_window: timedelta = DOWN_WINDOW
    slow_ms: float = SLOW_MS
    jaccard: float = CLUSTER_JACCARD


@dataclass
class Candidate:
    question: str
    history: list[dict[str, str]]
    acl: list[str]
    rules: list[str] = field(default_factory=list)
    trace_ids: list[str] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    logged_answer: str | None = None
    known_as: str | None = None  # "suite/case-id" when the question is already in a suite

    @property
    def id(self) -> str:
        key = json.dumps([_norm(self.question), self.history, self.acl], ensure_ascii=False)
        return "cand-" + hashlib.sha1(key.encode("utf-8")).hexdigest()[:10]

    def to_json(self, source: Path, mined_at: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "status": "needs_review",
            "suggested_suite": "hard",
            "question": self.question,
            "history": self.history,
            "acl": self.acl,
            "rules": self.rules,
            "evidence": self.evidence,
            "trace_ids": self.trace_ids,
            "logged_answer": self.logged_answer,
            "golden_answer": "",
            "golden_chunk_ids": [],
            # a tag is lowercase words joined by hyphens (the case schema's TAG_PATTERN)
            "tags": ["mined", *(rule.replace("_", "-") for rule in self.rules)],
            "annotator": "rag datasets mine",
            "mined_from": str(source),
            "mined_at": mined_at,
        }


@dataclass
class MineResult:
    candidates: list[Candidate]
    known: list[Candidate]
    counts: dict[str, int]
    answers: int
    feedback: int
    orphan_feedback: int  # feedback on a trace id the log does not hold
    p99_latency_ms: float | None
    clusters_down: list[dict[str, Any]]


def _norm(text: str) -> str:
    return alnum_key(text)  # the one normaliser (app.text.normalise)


def _terms(text: str) -> frozenset[str]:
    from app.text import tokenize  # jieba's dictionary loads on first use, not at import

    terms = frozenset(tokenize(text, query=True))
    return terms or frozenset({_norm(text)})


def _p99(values: Sequence[float]) -> float | None:
    """Nearest-rank P99 (the smallest value with ≥ 99 % of the values at or below it)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(0.99 * len(ordered)))
    return ordered[rank - 1]


def _latest_ratings(feedback: Iterable[FeedbackRecord]) -> list[FeedbackRecord]:
    latest: dict[tuple[str, str], FeedbackRecord] = {}
    for f in sorted(feedback, key=lambda r: r.when):
        latest[(f.trace_id, f.user)] = f
    return [f for f in latest.values() if f.rating == "down"]


def _clusters(answers: Sequence[AnswerRecord], jaccard: float) -> list[list[AnswerRecord]]:
    clusters: list[tuple[list[frozenset[str]], list[AnswerRecord]]] = []
    for a in answers:
        t = _terms(a.question)
        for term_sets, members in clusters:
            if any(len(t & s) / len(t | s) >= jaccard for s in term_sets):
                term_sets.append(t)
                members.append(a)
                break
        else:
            clusters.append(([t], [a]))
    return [members for _, members in clusters]


def _max_users_in_window(downs: Sequence[tuple[datetime, str]], window: timedelta) -> int:
    ordered = sorted(downs)
    best, lo = 0, 0
    for hi in range(len(ordered)):
        while ordered[hi][0] - ordered[lo][0] > window:
            lo += 1
        best = max(best, len({u for _, u in ordered[lo : hi + 1]}))
    return best


def _known_questions(datasets_dir: Path | None) -> dict[str, str]:
    known: dict[str, str] = {}
    if datasets_dir is None or not datasets_dir.is_dir():
        return known
    for path in sorted(datasets_dir.glob("*.jsonl")):
        suite = path.stem
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # `rag datasets check` owns dataset errors; a candidate list does not
            if isinstance(row, dict) and isinstance(row.get("question"), str):
                known.setdefault(_norm(row["question"]), f"{suite}/{row.get('id', '?')}")
    return known


def mine(
    log: AnswerLog, config: MineConfig | None = None, *, datasets_dir: Path | None = None
) -> MineResult:
    cfg = config or MineConfig()
    by_key: dict[str, Candidate] = {}

    def add(a: AnswerRecord, rule: str, **evidence: Any) -> None:
        history = [t.model_dump() for t in (a.history or [])]
        key = json.dumps([_norm(a.question), history, sorted(a.user_acl)], ensure_ascii=False)
        cand = by_key.get(key)
        if cand is None:
            cand = by_key[key] = Candidate(
                question=a.question, history=history, acl=sorted(a.user_acl), logged_answer=a.answer
            )
        if rule not in cand.rules:
            cand.rules.append(rule)
        if a.trace_id not in cand.trace_ids:
            cand.trace_ids.append(a.trace_id)
        cand.evidence.setdefault(rule, evidence)

    for a in log.answers:
        if a.mode == "injection_refused":
            continue  # an attack refused on purpose is not a retrieval miss
        no_results = (
            a.retrieved_count == 0 if a.retrieved_count is not None else a.top1_score is None
        )
        if no_results or (a.top1_score is not None and a.top1_score < cfg.low_top1):
            add(a, "no_recall", top1_score=a.top1_score, retrieved=a.retrieved_count)
        if a.invalid_citations:
            add(a, "citation_out_of_range", invalid_citations=a.invalid_citations)
        if a.latency_ms > cfg.slow_ms:
            add(a, "high_latency", latency_ms=a.latency_ms)

    traces = log.by_trace()
    downs = _latest_ratings(log.feedback)
    orphans = sum(1 for f in log.feedback if f.trace_id not in traces)
    down_by_trace: dict[str, list[FeedbackRecord]] = {}
    for f in downs:
        if f.trace_id in traces:
            down_by_trace.setdefault(f.trace_id, []).append(f)
    voted = [a for a in log.answers if a.trace_id in down_by_trace]
    clusters_down: list[dict[str, Any]] = []
    for members in _clusters(voted, cfg.jaccard):
        votes = [(f.when, f.user) for a in members for f in down_by_trace[a.trace_id]]
        users = _max_users_in_window(votes, cfg.down_window)
        clusters_down.append(
            {"questions": sorted({a.question for a in members}), "down_users_in_window": users}
        )
        if users >= cfg.down_users:
            for a in members:
                add(a, "thumbs_down", down_users_in_window=users, cluster_size=len(members))

    known_q = _known_questions(datasets_dir)
    candidates: list[Candidate] = []
    known: list[Candidate] = []
    for cand in by_key.values():
        cand.known_as = known_q.get(_norm(cand.question))
        (known if cand.known_as else candidates).append(cand)
    counts = {r: sum(1 for c in candidates if r in c.rules) for r in RULES}
    return MineResult(
        candidates=candidates,
        known=known,
        counts=counts,
        answers=len(log.answers),
        feedback=len(log.feedback),
        orphan_feedback=orphans,
        p99_latency_ms=_p99([a.latency_ms for a in log.answers]),
        clusters_down=clusters_down,
    )


def check_out_dir(out: Path, datasets_dir: Path) -> Path:
    """Candidates go to review, never into a suite: refuse ``out`` inside the suites folder."""
    resolved = out.resolve()
    suites = datasets_dir.resolve()
    if resolved == suites or suites in resolved.parents:
        raise UserError(
            f"--out {out}: inside the suites folder {datasets_dir} — candidates are proposals "
            "for review; write them under reports/candidates/ and add reviewed cases with "
            "`rag datasets edit` or a new version file"
        )
    return resolved


def write_candidates(result: MineResult, source: Path, out_dir: Path) -> Path:
    """Write ``mined_<UTC stamp>.jsonl`` under ``out_dir``; never overwrites a file."""
    out_dir.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    mined_at = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    body = "".join(
        json.dumps(c.to_json(source, mined_at), ensure_ascii=False, sort_keys=True) + "\n"
        for c in result.candidates
    )
    for n in range(1000):
        path = out_dir / (f"mined_{stamp}.jsonl" if n == 0 else f"mined_{stamp}_{n}.jsonl")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body)
        return path
    raise UserError(f"{out_dir}: 1000 candidate files for {stamp} already — clean the folder")
