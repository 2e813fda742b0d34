"""The typed records of an evaluation run: :class:`CaseResult`, :class:`RunMeta`,
:class:`Totals` and :class:`Report` (schema version 2).

Every seam a result crosses goes through these models: the runner returns a
:class:`CaseResult` per case, the checkpoint stores its ``model_dump_json()``, the report
is written with ``Report.model_dump_json()`` and read back with :func:`load_report`, and
compare, the Langfuse export, the CI scripts, the HTML page and the pytest front end read
its attributes — never ``.get("x") or {}`` chains. ``reports/report.schema.json`` is
generated from :class:`Report` (``make schema``), not written by hand.

All records are frozen and ``extra="forbid"`` (a misspelt field is an error, not a silent
default, as in pydantic_evals' ``Dataset``), and refuse NaN/infinity: an undefined value is
``null`` with a reason. They reuse the typed pieces that already exist:
:class:`~app.eval.scoring.base.Score` (with its judge samples),
:class:`~app.generation.pipeline.trace.Trace`, :class:`~app.eval.config.RunConfig` and
:class:`~app.llm.engine.EngineStats`.

Shape (after Inspect AI's ``EvalLog`` — header, results, samples)::

    Report = ReportSummary (schema_version, run_id, status, meta, metrics, totals, summary,
                            verdicts, breakdowns, refusal_confusion, bad_cases)
           + cases: list[CaseResult]

:class:`ReportSummary` is everything but the cases, so a later version can keep the cases
in a JSONL file beside a summary (one :class:`CaseResult` per line) without a new model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.eval.config import RunConfig
from app.eval.scoring.base import Score
from app.generation.pipeline.trace import SentMessage, Trace
from app.llm.engine import EngineStats

SCHEMA_VERSION: Literal["2"] = "2"
RUN_ID_PATTERN = r"^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}$"
CREATED_AT_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"

Status = Literal["pass", "fail", "partial"]
FrontEnd = Literal["cli", "pytest", "api"]
VerdictName = Literal["pass", "fail", "no_data", "not_measured"]
BadKind = Literal[
    "red_line", "must_not_include", "injection", "error", "judge_score", "refusal_error"
]


class Record(BaseModel):
    """Base of every report record: frozen, no unknown field, no NaN."""

    # a NaN that got in anyway (a free-form field) is written as the constant NaN, so the
    # writers' check finds it, never as a silent null
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        allow_inf_nan=False,
        ser_json_inf_nan="constants",
        defer_build=True,  # validators built at first use, after the first request leaves
    )


# ---------------------------------------------------------------- meta


class PromptRef(Record):
    version: str  # qualified, e.g. system/kb_qa_v2
    hash: str | None  # sha256:… of the module's content


class GitState(Record):
    sha: str | None
    #: uncommitted changes to tracked files, or any untracked file under the prompts, the
    #: datasets or the knowledge base the run read (``untracked`` lists those)
    dirty: bool | None
    untracked: list[str] = Field(default_factory=list)


class CandidateInfo(Record):
    provider: str
    offline: bool


class JudgeInfo(Record):
    provider: str | None  # None: the run had no judge
    offline: bool | None
    samples: int = Field(ge=0)
    temperature: float = 0.0
    allow_weak: bool
    weak: bool = Field(
        default=False,
        description="a weak judge (the local model tier, or one allowed by --allow-weak-judge): "
        "its metrics are reported and never gate the run",
    )
    warnings: list[str]
    prompts: dict[str, PromptRef]


class DatasetRef(Record):
    name: str
    version: str
    sha256: str
    path: str
    cases: int | None = Field(default=None, ge=0)


class KbRef(Record):
    """The knowledge base a run retrieved from (:func:`app.retrieval.kb.kb_fingerprint`)."""

    name: str
    path: str
    sha256: str = Field(description="over every document's path, title, acl and body")
    documents: dict[str, str] = Field(description="path -> 16 hex digits of its sha256")
    chunks: int = Field(ge=0)
    chunker: str = Field(description="chunker version / max characters per chunk")
    analyser: str = Field(description="the text analyser's version")


class ThresholdsRef(Record):
    path: str
    version: str
    sha256: str
    suite: str
    bad_judge_score: float = Field(
        description="a judge score below this makes a case a bad case (thresholds.toml)"
    )


class ShardInfo(Record):
    """This report is shard ``index`` of ``count`` (``rag eval run --shard i/N``)."""

    index: int = Field(ge=1)
    count: int = Field(ge=1)
    cases: int = Field(ge=0, description="cases in this shard")
    planned: int = Field(ge=0, description="cases in all shards together (the run's plan)")


class RunMeta(Record):
    """Who ran what, with which rulers: the provenance of every number in the report."""

    git: GitState
    command: list[str]
    front_end: FrontEnd
    suite: str
    seed: int
    k: int = Field(ge=1)
    resumed_from: str | None
    candidate: CandidateInfo
    judge: JudgeInfo
    prompts: dict[str, PromptRef]  # prompt id -> the version the traces used
    datasets: list[DatasetRef]
    thresholds: ThresholdsRef
    config: RunConfig
    #: the retriever as resolved (bm25, or hybrid with its embedder and calibration constants)
    retrieval: dict[str, Any] = Field(default_factory=dict)
    #: the knowledge base's fingerprint (None: a report written before runs recorded it)
    kb: KbRef | None = None
    #: ground-truth differences a merge was told to accept (``--allow-truth-change``);
    #: ``rag eval compare`` prints them
    truth_waived: list[str] = Field(default_factory=list)
    #: (prompt, model, role) triples outside APPLICABLE_MODELS (--allow-unlisted-model)
    unlisted_models: list[dict[str, str]] = Field(default_factory=list)
    shard: ShardInfo | None = None  # set on a shard's report; None on a whole or merged run
    merged_from: list[str] = Field(default_factory=list)  # run ids of the merged shards


class MetricInfo(Record):
    """A metric's spec as the report records it (:class:`~app.eval.scoring.base.MetricSpec`)."""

    direction: Literal["higher", "lower", "none"]  # none: no better direction
    kind: Literal["deterministic", "judge"]
    unit: str
    scale: Literal["binary", "continuous"]
    red_line: bool
    group: str = ""
    description: str = ""


# ---------------------------------------------------------------- per case


#: a case's outcome class (:mod:`app.eval.report.outcome`: the rule, first match wins)
Outcome = Literal[
    "retrieval_miss",
    "retrieved_unused",
    "unsupported_claim",
    "wrong_refusal",
    "missed_refusal",
    "acl_leak",
    "not_evaluated",
    "correct",
]


class Sample(Record):
    """One of a case's ``--repeat`` samples, compactly: no trace and no answer text (sample 0
    is the case itself), only what tells the samples apart."""

    index: int = Field(ge=0)
    answer_sha: str | None = Field(
        description="first 16 hex digits of the answer's sha256 (None: the pipeline failed)"
    )
    refused: bool | None = Field(description="the sample's answer was a refusal")
    passed: bool | None = Field(
        description="not a bad case (the bad-case policy of the summary); None: not evaluated"
    )
    values: dict[str, float | None]  # metric -> this sample's value (None: undefined)
    error: str | None = None  # the sample failed (pipeline or judge); redacted
    judge_cost_usd: float = Field(default=0.0, ge=0)  # what this sample's judge calls cost


class Repeat(Record):
    """A case asked ``--repeat K`` times (:mod:`app.eval.run.repeat`): every sample scored, how
    often the outcome flipped and how far each score spread."""

    samples: list[Sample]
    flip_rate: float = Field(
        ge=0,
        le=1,
        description="share of the samples whose outcome (refused, passed) differs from the "
        "most common one; 0: every sample agrees",
    )
    spread: dict[str, float] = Field(
        description="metric -> max - min of its defined values across the samples"
    )
    unstable: bool = Field(
        description="the outcome flipped, a score spread beyond its margin of practical "
        "relevance, or a sample failed: rag eval compare leaves the case out of its verdicts"
    )
    reasons: list[str] = Field(default_factory=list)  # why unstable, one sentence each


class CaseResult(Record):
    """One case's result: what the runner returns, the checkpoint stores and a report lists."""

    id: str
    question: str
    tags: list[str]
    difficulty: str | None
    expected_refusal: bool
    metrics: dict[str, Score]
    answer: str | None  # None: the pipeline failed (see errors)
    refused: bool | None
    trace: Trace | None  # None: the pipeline failed before it produced a trace
    errors: list[str]
    red_lines: list[str]  # red-line metrics this case hit
    cost_usd: float = Field(ge=0)
    #: the calls of this case whose reply carried text that was not valid Unicode (lone
    #: surrogates, replaced by U+FFFD at the provider boundary): one sentence per call
    invalid_text: list[str] = Field(default_factory=list)
    #: where the case failed, or ``correct`` (:mod:`app.eval.report.outcome`); ``None`` in a
    #: report written before outcome classes
    outcome: Outcome | None = None
    #: ``--repeat K`` (K > 1, a model candidate): the K samples of this case (sample 0 is the
    #: case's own answer and metrics); None: asked once
    repeat: Repeat | None = None

    @model_validator(mode="after")
    def _null_has_reason(self) -> CaseResult:
        for name, score in self.metrics.items():
            if score.value is not None and not math.isfinite(score.value):
                raise ValueError(
                    f"case {self.id}: metric {name!r} is {score.value}; an undefined value "
                    "is null with a reason"
                )
            if score.value is None and not score.reason:
                raise ValueError(
                    f"case {self.id}: metric {name!r} is null without a reason "
                    "(an undefined value must say why)"
                )
        return self

    def value(self, metric: str) -> float | None:
        """The metric's value for this case (``None``: undefined or not measured)."""
        score = self.metrics.get(metric)
        return None if score is None else score.value


# ---------------------------------------------------------------- aggregates


class Histogram(Record):
    edges: list[float]
    counts: list[int]


class Distribution(Record):
    """A metric's per-case values over the suite (:func:`app.eval.stats.describe.describe`)."""

    n: int = Field(ge=0)  # defined values
    n_errors: int = Field(ge=0)
    n_null: int = Field(default=0, ge=0)
    mean: float | None
    std: float | None
    min: float | None
    p10: float | None
    median: float | None
    p90: float | None
    max: float | None
    histogram: Histogram
    ci95: tuple[float, float] | None
    reason: str | None = None  # why there is no value (no defined values)


class GroupMetric(Record):
    n: int = Field(ge=0)
    n_errors: int = Field(ge=0)
    mean: float | None


class Group(Record):
    cases: int = Field(ge=0)
    metrics: dict[str, GroupMetric]


class Breakdowns(Record):
    by_tag: dict[str, Group]
    by_difficulty: dict[str, Group]


class RefusalConfusion(Record):
    true_refusal: int = Field(ge=0, description="expected refusal, refused")
    missed_refusal: int = Field(ge=0, description="expected refusal, answered")
    false_refusal: int = Field(ge=0, description="expected answer, refused")
    true_answer: int = Field(ge=0, description="expected answer, answered")
    error_rate: float | None


class BadReason(Record):
    """Why a case is bad. ``hard``: a failure on every provider (red line, forbidden text,
    failed injection case, evaluation error); otherwise a quality shortfall (a judge score
    below the bar, a refusal error) that an offline baseline reports without failing."""

    kind: BadKind
    hard: bool
    metric: str | None = None
    value: float | None = None
    message: str


class BadCase(Record):
    id: str
    reasons: list[BadReason] = Field(min_length=1)

    @property
    def hard(self) -> list[BadReason]:
        return [r for r in self.reasons if r.hard]

    @property
    def quality(self) -> list[BadReason]:
        return [r for r in self.reasons if not r.hard]


class MetricVerdict(Record):
    threshold: str
    min: float | None
    max: float | None
    value: float | None
    n: int = Field(ge=0)
    n_errors: int = Field(ge=0)
    verdict: VerdictName
    reason: str | None


class Totals(Record):
    cases_planned: int = Field(ge=0)
    cases_done: int = Field(ge=0)
    cases_with_errors: int = Field(ge=0)
    judge_errors: int = Field(ge=0)
    cost_usd: float = Field(ge=0)
    #: ``--repeat K``: cases unstable across their samples (None: no case was sampled)
    cases_unstable: int | None = Field(default=None, ge=0)
    candidate_cost_usd: float = Field(ge=0)
    judge_cost_usd: float = Field(ge=0)
    duration_s: float = Field(ge=0)
    engine: EngineStats | None  # None: an engine without counters (a test double)


# ---------------------------------------------------------------- the report


class ReportSummary(Record):
    """Everything in a report except the per-case results."""

    schema_version: Literal["2"]
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    created_at: str = Field(pattern=CREATED_AT_PATTERN)
    #: the run's one status under the gate it was asked for (``meta.config.gate``) and the line
    #: that names what was gated (:mod:`app.eval.report.status`; ``None``: a report written
    #: before status lines, gated on every threshold)
    status: Status
    status_line: str | None = None
    partial: bool
    partial_reason: str | None
    meta: RunMeta
    metrics: dict[str, MetricInfo]
    totals: Totals
    summary: dict[str, Distribution]
    verdicts: dict[str, MetricVerdict]
    breakdowns: Breakdowns
    refusal_confusion: RefusalConfusion
    bad_cases: list[BadCase]
    #: cases per outcome class, every class listed (:mod:`app.eval.report.outcome`; empty in a
    #: report written before outcome classes)
    outcomes: dict[str, int] = Field(default_factory=dict)
    # sha256 -> text of sent messages (``trace.sent``) stored once per distinct text, the
    # cases' messages referring to it by hash (``content`` null); empty in a run's streamed
    # report, whose cases keep their texts inline
    sent_texts: dict[str, str] = Field(default_factory=dict)

    @property
    def judge_metrics(self) -> list[str]:
        return [name for name, info in self.metrics.items() if info.kind == "judge"]

    @property
    def red_line_metrics(self) -> list[str]:
        return [name for name, info in self.metrics.items() if info.red_line]

    @property
    def offline(self) -> bool:
        """An offline candidate or judge produced these numbers (a baseline, not a model)."""
        return bool(self.meta.candidate.offline or self.meta.judge.offline)

    def bad_case(self, case_id: str) -> BadCase | None:
        return next((b for b in self.bad_cases if b.id == case_id), None)


class Report(ReportSummary):
    """A full evaluation report (``reports/eval_<UTC>.json``)."""

    cases: list[CaseResult]

    @model_validator(mode="after")
    def _unique_ids(self) -> Report:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"case id {case.id!r} appears twice; ids must be unique")
            seen.add(case.id)
            for m in case.trace.sent if case.trace is not None else ():
                if m.content is None and m.sha256 not in self.sent_texts:
                    raise ValueError(
                        f"case {case.id}: sent {m.role} message {m.sha256[:12]}… is not in "
                        "sent_texts (a report keeps every sent text once)"
                    )
        return self

    def sent_text(self, message: SentMessage) -> str | None:
        """The (possibly cut) text of a sent message: inline (a streamed run report) or in
        ``sent_texts`` by its hash (a merged or in-memory built report)."""
        if message.content is not None:
            return message.content
        return self.sent_texts.get(message.sha256)

    def case(self, case_id: str) -> CaseResult | None:
        return next((c for c in self.cases if c.id == case_id), None)


def validation_problems(exc: ValidationError, data: object = None, limit: int = 10) -> str:
    """The errors of ``exc`` one per line: the field's path (a case named by its id), the
    problem, and the value that was there."""
    errors = exc.errors(include_url=False)
    cases = data.get("cases") if isinstance(data, Mapping) else None
    lines = []
    for e in errors[:limit]:
        loc = [str(p) for p in e["loc"]]
        if len(loc) >= 2 and loc[0] == "cases" and isinstance(cases, list):
            i = int(loc[1])
            case = cases[i] if i < len(cases) else None
            cid = case.get("id") if isinstance(case, Mapping) else None
            loc[1] = f"{i} ({cid})" if isinstance(cid, str) else loc[1]
        got = e.get("input")
        shown = "" if isinstance(got, Mapping | list) else f" (got {str(repr(got))[:60]})"
        lines.append(f"  {'/'.join(loc) or '<root>'}: {e['msg']}{shown}")
    more = f"\n  … and {len(errors) - limit} more" if len(errors) > limit else ""
    return f"{len(errors)} problem(s):\n" + "\n".join(lines) + more
