"""One case of a run: evaluated, committed to the checkpoint, digested.

:func:`evaluate_case` runs a case end to end (pipeline, judges, metrics) and never raises
for a provider failure: it is recorded in the result. :class:`CaseRun` is what a process of
a run does with each case it takes — the runner's own loop and every worker process
(:mod:`app.eval.run.workers`) use the same one: evaluate, commit the result with the process's
record (its engine counters so far, under its own ``process:`` key), and return the
:class:`~app.eval.report.summary.CaseDigest` the summary needs.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from app.eval.config import RunConfig
from app.eval.datasets.case import Case
from app.eval.report.summary import digest
from app.eval.run.checkpoint import Checkpoint
from app.eval.run.observe import PipelineFactory, observe_case
from app.eval.scoring.base import MetricContext, Score
from app.eval.scoring.generation import REWRITE_EQUIVALENCE, rewrite_matches
from app.eval.scoring.judges import JudgeConfig, gather, in_process, score_judge
from app.eval.scoring.registry import JudgeInput
from app.eval.scoring.table import (
    judge,
    judge_table,
    red_line_metrics,
    score_case,
    select_metrics,
)
from app.generation.pipeline.trace import Trace
from app.llm.engine_stats import EngineStats
from app.llm.recording import invalid_text
from app.llm.types import EngineLike
from app.redact import redact

# a case's record and outcome are imported when the first case ends, not before the first
# request leaves (the runner's loop waits on the network by then)
if TYPE_CHECKING:
    from app.eval.report.records import CaseResult
    from app.eval.report.summary import CaseDigest


@dataclass
class CaseRun:
    """How one process of a run evaluates and commits each case it takes."""

    factory: PipelineFactory
    engine: EngineLike
    config: RunConfig
    base_ctx: MetricContext
    checkpoint: Checkpoint
    key: str  #: this process's ``process:`` key in the checkpoint
    started: float  #: time.monotonic() when the process started
    judge_metrics: Sequence[str]
    bad_judge_score: float
    worker_of: str | None = None  #: the main process's key (a worker process)

    async def __call__(self, case: Case) -> tuple[CaseResult, CaseDigest]:
        if self._sampled():
            result = await self._repeat(case)
        else:
            result = await evaluate_case(
                case, self.factory, self.engine, self.config, self.base_ctx
            )
            from app.eval.report.outcome import with_outcome  # once the case has ended

            result = with_outcome(result, self.bad_judge_score)  # where it failed, if it did
        # with this process's counters so far (a later --resume sums every process's)
        record = process_record(self.engine, self.started, worker_of=self.worker_of)
        self.checkpoint.save(result, meta=(self.key, record))
        return result, digest(result, self.judge_metrics, self.bad_judge_score)

    def _sampled(self) -> bool:
        if self.config.repeat <= 1:  # asked once: --repeat's code is not imported
            return False
        from app.eval.run import repeat

        return repeat.sampled(self.config)

    async def _repeat(self, case: Case) -> CaseResult:
        """``--repeat K``: the K samples of the case, asked together (a batch or a slow
        provider is waited for once, not K times) and each scored; the case keeps sample 0's
        answer and metrics, carries the samples compactly (:mod:`app.eval.run.repeat`) and
        the spend of all of them."""
        results = await gather(
            (
                evaluate_case(
                    case, self.factory, self.engine, self.config, self.base_ctx, sample_index=i
                )
                for i in range(self.config.repeat)
            ),
            one_by_one=in_process(self.config.model_ref.require_provider()),
        )
        from app.eval.report.outcome import with_outcome  # once the samples have ended
        from app.eval.run import repeat

        first = with_outcome(results[0], self.bad_judge_score)  # where it failed, if it did
        samples = [
            repeat.sample_of(r, i, self.judge_metrics, self.bad_judge_score)
            for i, r in enumerate(results)
        ]
        record = repeat.summarise(samples, repeat.default_margins())
        cost = round(sum(r.cost_usd for r in results), 8)
        return first.model_copy(update={"repeat": record, "cost_usd": cost})


async def evaluate_case(
    case: Case,
    factory: PipelineFactory,
    engine: EngineLike,
    config: RunConfig,
    base_ctx: MetricContext,
    *,
    sample_index: int = 0,
) -> CaseResult:
    """One case, end to end. Never raises for a provider failure: it is recorded.
    ``sample_index``: which of the candidate's ``--repeat`` samples (cached apart)."""
    with invalid_text() as notes:
        result = await _evaluate(case, factory, engine, config, base_ctx, sample_index)
    if notes:  # which calls carried text that was not valid Unicode (app/wellformed.py)
        result = result.model_copy(update={"invalid_text": [redact(n) for n in notes]})
    return result


async def _evaluate(
    case: Case,
    factory: PipelineFactory,
    engine: EngineLike,
    config: RunConfig,
    base_ctx: MetricContext,
    sample_index: int = 0,
) -> CaseResult:
    errors: list[str] = []
    selected = select_metrics(config.metrics)
    obs, failure = await observe_case(case, factory, sample_index=sample_index)
    if obs is None:
        errors.append(failure)
        reason = f"pipeline error: {failure}"
        metrics = {name: Score.undefined(reason, n_errors=1) for name in selected}
        return _result(case, metrics, None, None, None, errors, 0.0)
    judge_scores: dict[str, Score] = {}
    judge_cost = 0.0
    judge_ref = config.judge_ref
    if judge_ref is not None:
        jcfg = JudgeConfig(
            judge_ref,
            config.judge_samples,
            config.allow_weak_judge,
            max_tokens=min(512, config.max_tokens or 512),
        )
        inp = JudgeInput.of(case, obs)
        tasks: dict[str, Awaitable[Score]] = {
            name: score_judge(engine, jcfg, entry, inp, factory.render)
            for name, entry in judge_table().items()
            if name in selected
        }
        # rewrite_accuracy asks the correctness judge when the rewrite is not a normalised
        # match — only when both are selected (--metrics deterministic: no judge call at all)
        if case.golden_rewrite is not None and {"rewrite_accuracy", "correctness"} <= set(selected):
            produced = obs.rewrite if obs.rewrite is not None else case.question
            if not rewrite_matches(produced, case.golden_rewrite):
                equivalence = JudgeInput(
                    question=case.question, candidate=produced, golden_answer=case.golden_rewrite
                )
                tasks[REWRITE_EQUIVALENCE] = score_judge(
                    engine, jcfg, judge("correctness"), equivalence, factory.render
                )
        done = await gather(tasks.values(), one_by_one=in_process(judge_ref.require_provider()))
        judge_scores = dict(zip(tasks, done, strict=True))
        judge_cost = sum(float(s.detail.get("cost_usd", 0.0)) for s in done)
        for name, score in judge_scores.items():
            if score.n_errors:
                errors.append(f"{name}: {score.reason}")
    ctx = replace(base_ctx, judge_scores=judge_scores)
    metrics = score_case(case, obs, ctx, selected)
    cost = (obs.cost_usd or 0.0) + judge_cost
    return _result(case, metrics, obs.answer, obs.refused, obs.trace, errors, cost)


def _result(
    case: Case,
    metrics: dict[str, Score],
    answer: str | None,
    refused: bool | None,
    trace: Trace | None,
    errors: list[str],
    cost: float,
) -> CaseResult:
    from app.eval.report.records import CaseResult

    red = [n for n in red_line_metrics() if n in metrics and (metrics[n].value or 0) > 0]
    return CaseResult(
        id=case.id,
        question=case.question,
        tags=list(case.tags),
        difficulty=case.difficulty,
        expected_refusal=case.expected_refusal,
        metrics=dict(metrics),
        answer=answer,
        refused=refused,
        trace=trace,
        errors=[redact(e) for e in errors],  # an error text never carries a secret
        red_lines=red,
        cost_usd=round(cost, 8),
    )


# --- the processes' records in the checkpoint (also what --resume sums) -----------------


def process_record(
    engine: object, started: float, *, worker_of: str | None = None
) -> dict[str, Any]:
    """What a process of a run records with each case it commits: its engine counters and
    how long it has run (a worker process records 0 s: its time is within the main
    process's, and a resumed run sums the processes' durations)."""
    stats = getattr(engine, "stats", None)
    record: dict[str, Any] = {
        "engine": stats.as_dict() if isinstance(stats, EngineStats) else None,
        "duration_s": 0.0 if worker_of else round(time.monotonic() - started, 3),
    }
    if worker_of:
        record["worker_of"] = worker_of
    return record


def process_stats(record: dict[str, Any]) -> EngineStats | None:
    data = record.get("engine")
    if not isinstance(data, dict):
        return None
    known = {k: v for k, v in data.items() if k in EngineStats.__dataclass_fields__}
    return EngineStats(**known)


def summed_stats(engine: object, others: list[EngineStats | None]) -> EngineStats | None:
    """This process's counters plus those every other process of the run recorded, always
    through :meth:`EngineStats.summed` (which rounds the cost): calls finish in a different
    order from run to run and float sums depend on the order, so an unrounded one-process
    total would differ in its last digit between two runs of the same job."""
    stats = getattr(engine, "stats", None)
    mine = stats.copy() if isinstance(stats, EngineStats) else None  # None: a test double
    parts = [p for p in others if p is not None]
    if mine is None:
        return EngineStats.summed(parts) if parts else None
    return EngineStats.summed([*parts, mine])
