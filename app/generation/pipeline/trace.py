"""The records a pipeline answer returns: :class:`Answer`, :class:`Citation`, :class:`Trace`.

Pydantic models (``extra="forbid"``) so the harness can serialise them into reports with
``model_dump(mode="json")`` and read them back strictly. A trace only ever holds chunks the
asking user may read (retrieval filters by ACL before scoring).
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.text.refusal import REFUSAL_MODES

if TYPE_CHECKING:
    from app.generation.pipeline.memory import MemoryResult
    from app.generation.pipeline.rewrite import RewriteResult
    from app.llm.types import ChatRequest

AnswerMode = Literal["no_hits", "refusal", "strict", "assisted", "injection_refused"]


class _Record(BaseModel):
    # a NaN is written as the JSON constant NaN (which the report writers refuse), never as
    # a silent null
    # validators built at first use (a run's first case), not at import
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants", defer_build=True)


class RetrievedChunk(_Record):
    chunk_id: str
    title: str
    score: float  # normalised [0, 1] (app.retrieval.bm25)
    raw_score: float
    query: Literal["rewritten", "original"]  # which query variant scored it best


class CitationCheck(_Record):
    n: int
    chunk_id: str | None  # None when [n] is outside the supplied documents
    valid: bool


class RewriteTrace(_Record):
    strategy: str  # standalone / disambiguate / off
    triggered: bool
    trigger: str | None = None
    called_llm: bool = False
    cached: bool = False
    reverted: bool = False
    changed_ratio: float | None = None
    reason: str = ""
    prompt_version: str | None = None
    candidates: list[str] = Field(default_factory=list)


class MemoryTrace(_Record):
    counter: str  # e.g. "bpe:cl100k_base"
    max_tokens: int
    prompt_tokens: int  # template + documents + question
    budget_tokens: int  # max_tokens - prompt_tokens
    history_tokens: int
    history_messages: int
    summarised_pairs: int
    kept_messages: int
    summary: str | None = None
    prompt_version: str | None = None


class InjectionTrace(_Record):
    detected: bool = False
    patterns: list[str] = Field(default_factory=list)  # the signals that matched (family/name)
    families: list[str] = Field(default_factory=list)  # their families (override, role, …)
    score: float = 0.0  # the question's injection score (flagged at >= the threshold)
    history_turns: list[int] = Field(default_factory=list)  # flagged history messages (1-based)
    documents: list[str] = Field(default_factory=list)  # flagged retrieved chunks, kept out
    policy: str = "refuse"
    action: Literal["none", "refused", "cleaned", "alerted"] = "none"
    removed: list[str] = Field(default_factory=list)  # ``clean``: the fragments taken out
    cleaned_question: str | None = None  # ``clean``: the question the pipeline went on with


SENT_MESSAGE_LIMIT = 20_000  # characters of one sent message a trace keeps; the rest is counted


class SentMessage(_Record):
    """One message of the answer call as handed to the provider (system first, then history
    and the user turn). ``sha256`` and ``chars`` are of the full text; ``content`` keeps its
    first :data:`SENT_MESSAGE_LIMIT` characters (``cut``: how many more there were). In a
    report ``content`` is ``None``: the text is stored once per distinct text in the report's
    ``sent_texts`` (the system message of 10,000 cases is stored once)."""

    role: str
    sha256: str
    chars: int
    content: str | None = None
    cut: int = 0

    @classmethod
    def of(cls, role: str, text: str) -> SentMessage:
        return cls(**sent_row(role, text))


def sent_row(role: str, text: str) -> dict[str, Any]:
    """:meth:`SentMessage.of`'s fields as a plain dict (the pipeline validates its trace once)."""
    import hashlib

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    kept = text[:SENT_MESSAGE_LIMIT]
    return {
        "role": role,
        "sha256": digest,
        "chars": len(text),
        "content": kept,
        "cut": len(text) - len(kept),
    }


class TokenUsage(_Record):
    input: int = 0
    output: int = 0
    llm_calls: int = 0
    cached_calls: int = 0


class ArmChoice(_Record):
    """The arm a prompt under rollout served this user, and the version it stands for."""

    arm: Literal["control", "candidate", "pinned"]
    version: str  # qualified, e.g. system/kb_qa_v3


class Trace(_Record):
    trace_id: str
    created_at: str  # UTC ISO 8601
    model: str
    user_acl: list[str]
    question: str
    rewritten_query: str
    rewrite: RewriteTrace
    mode: AnswerMode
    top1_score: float | None = None
    floors: dict[str, float] = Field(default_factory=dict)
    retrieved: list[RetrievedChunk] = Field(default_factory=list)  # reranked, best first
    context_chunk_ids: list[str] = Field(default_factory=list)  # documents [1]..[n]
    prompt_version: str | None = None  # the QA/refusal prompt that ran, e.g. system/kb_qa_v2
    prompt_hash: str | None = None
    prompt_versions: dict[str, str] = Field(default_factory=dict)  # role -> qualified version
    memory: MemoryTrace | None = None
    sent: list[SentMessage] = Field(default_factory=list)  # the answer call's messages as sent
    raw_answer: str | None = None  # the model's text before rejection substitution
    rejected: bool = False  # a rejection trigger keyword replaced the answer
    uncertain: bool = False  # "无法确定": citation checks skipped, bad-case logged
    citations: list[CitationCheck] = Field(default_factory=list)
    invalid_citations: list[int] = Field(default_factory=list)
    injection: InjectionTrace = Field(default_factory=InjectionTrace)
    tokens: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float | None = None
    latency_ms: float = 0.0
    user: str | None = None  # the user or session id the arms were chosen by
    # "candidate" when any prompt served its rollout candidate, "pinned" under RAG_PROMPT_PIN
    arm: Literal["control", "candidate", "pinned"] = "control"
    arms: dict[str, ArmChoice] = Field(default_factory=dict)  # prompt id -> arm (rollouts, pins)

    def used_prompt_versions(self) -> set[str]:
        """The qualified prompt versions this answer rendered (answer, rewrite, summary, …)."""
        found = [self.prompt_version, *self.prompt_versions.values(), self.rewrite.prompt_version]
        found.append(self.memory.prompt_version if self.memory is not None else None)
        return {v for v in found if v}


class Citation(_Record):
    n: int
    chunk_id: str
    title: str


class Answer(_Record):
    text: str
    citations: list[Citation] = Field(default_factory=list)
    trace: Trace
    # app.text.answer_refused: a refusing mode, a rejection substitution, or the prompt's
    # rejection answer itself — what the answer log, shadow replay and the harness read
    # (the pipeline sets it; the parts of the rule the trace holds are applied here too)
    refused: bool = False

    @model_validator(mode="after")
    def _refused_by_trace(self) -> Answer:
        if not self.refused and (self.trace.mode in REFUSAL_MODES or self.trace.rejected):
            object.__setattr__(self, "refused", True)  # frozen: set once, while validating
        return self

    # the context text the pipeline placed into the prompt ("" when the prompt had none:
    # no hits, refusal mode, injection refusal) — what a faithfulness judge must read
    context: str = ""


def sent_messages(request: ChatRequest) -> list[SentMessage]:
    """The messages a chat API receives for ``request`` (:func:`prompt_messages`: a
    single-string format is one user message), system first."""
    return [SentMessage(**row) for row in sent_rows(request)]


def sent_rows(request: ChatRequest) -> list[dict[str, Any]]:
    """:func:`sent_messages` as plain dicts (:func:`sent_row`)."""
    from app.llm.providers.base import prompt_messages

    system, messages = prompt_messages(request)
    head = [sent_row("system", system)] if system is not None else []
    return head + [sent_row(role, content) for role, content in messages]


def new_trace_id() -> str:
    """``uuid.uuid4().hex[:16]`` without the UUID object: 8 random bytes, the version nibble
    (4) in the 13th hex digit as uuid4 puts it."""
    head = bytearray(os.urandom(8))
    head[6] = (head[6] & 0x0F) | 0x40
    return head.hex()


_STAMP: tuple[int, str] = (-1, "")


def utc_stamp() -> str:
    """``datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")``, formatted once per second."""
    global _STAMP
    t = time.time()  # the clock datetime.now reads, its microseconds rounded as it does
    now = int(t) + (round((t - int(t)) * 1e6) >= 1_000_000)
    stamp = _STAMP
    if stamp[0] != now:
        stamp = _STAMP = (now, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)))
    return stamp[1]


def rewrite_trace(rw: RewriteResult) -> RewriteTrace:
    return RewriteTrace(**rewrite_row(rw))


def rewrite_row(rw: RewriteResult) -> dict[str, Any]:
    """:func:`rewrite_trace`'s fields as a plain dict."""
    return {
        "strategy": rw.strategy,
        "triggered": rw.triggered,
        "trigger": rw.trigger,
        "called_llm": rw.called_llm,
        "cached": rw.cached,
        "reverted": rw.reverted,
        "changed_ratio": rw.changed_ratio,
        "reason": rw.reason,
        "prompt_version": rw.prompt_version,
        "candidates": list(rw.candidates),
    }


def memory_trace(m: MemoryResult, max_tokens: int, prompt_tokens: int, n: int) -> MemoryTrace:
    return MemoryTrace(**memory_row(m, max_tokens, prompt_tokens, n))


def memory_row(m: MemoryResult, max_tokens: int, prompt_tokens: int, n: int) -> dict[str, Any]:
    """:func:`memory_trace`'s fields as a plain dict."""
    return {
        "counter": m.counter,
        "max_tokens": max_tokens,
        "prompt_tokens": prompt_tokens,
        "budget_tokens": m.budget_tokens,
        "history_tokens": m.history_tokens,
        "history_messages": n,
        "summarised_pairs": m.summarised_pairs,
        "kept_messages": len(m.recent),
        "summary": m.summary,
        "prompt_version": m.summary_prompt_version,
    }
