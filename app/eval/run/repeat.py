"""``--repeat K``: the candidate asked K times per case, and how stable its outcome is.

Sample ``i`` of a case runs the pipeline with ``sample_index=i``: the response cache (and the
pipeline warm cache) key each sample apart, so a rerun replays sample ``i`` for sample ``i``
and never sample 0 for all of them (as judge samples already are). Every sample is scored
like the case itself; sample 0 *is* the case (its answer, trace and metrics are the case's
own, as in a run without ``--repeat``), and :func:`summarise` records the K samples
compactly on the case (:class:`~app.eval.report.records.Repeat`):

* **flip rate** — the share of samples whose outcome (refused, passed: not a bad case)
  differs from the most common outcome (0: every sample agrees);
* **spread** — each metric's max − min across the samples' defined values;
* **unstable** — the outcome flipped, a quality score spread beyond its margin of practical
  relevance (``thresholds.toml [margins]``; the cost group — latency, tokens, cost — moves
  with the machine and is not counted), or a sample failed. ``rag eval compare`` leaves
  unstable cases out of its verdicts and says how many.

An offline baseline is deterministic — its K samples would be identical — so it is asked
once and :func:`offline_note` says so instead of pretending to have sampled.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from app.eval.config import RunConfig
from app.eval.scoring.table import specs

if TYPE_CHECKING:  # imported when a sample is recorded (a run starts without the records)
    from app.eval.report.records import CaseResult, Repeat, Sample

#: metric groups whose spread says nothing about the answer (they move with the machine)
NOT_COUNTED_GROUPS = ("cost",)


def sampled(config: RunConfig) -> bool:
    """Whether the run asks its candidate more than once per case."""
    return config.repeat > 1 and not config.model_ref.offline


def offline_note(config: RunConfig) -> str | None:
    """What a ``--repeat`` run of an offline candidate says instead of sampling it."""
    if config.repeat > 1 and config.model_ref.offline:
        return (
            f"--repeat {config.repeat}: the candidate {config.model} is an offline baseline "
            f"and deterministic — its {config.repeat} samples would be identical, so each case "
            "was asked once (no flip rate or spread measured)"
        )
    return None


@lru_cache(maxsize=1)
def default_margins() -> dict[str, float]:
    """The margins of practical relevance (``thresholds.toml [margins]``), read once."""
    from app.eval.scoring.thresholds import load_margins

    return load_margins()


def _sha(answer: str | None) -> str | None:
    return None if answer is None else hashlib.sha256(answer.encode("utf-8")).hexdigest()[:16]


def sample_of(
    result: CaseResult, index: int, judge_metrics: Sequence[str], bad_judge_score: float
) -> Sample:
    """One sample's compact record."""
    from app.eval.report.records import Sample
    from app.eval.report.summary import bad_case

    failed = result.answer is None or bool(result.errors)
    return Sample(
        index=index,
        answer_sha=_sha(result.answer),
        refused=result.refused,
        passed=None if failed else bad_case(result, judge_metrics, bad_judge_score) is None,
        values={name: score.value for name, score in sorted(result.metrics.items())},
        error="; ".join(result.errors)[:300] if failed else None,
        judge_cost_usd=round(
            sum(
                float(s.detail.get("cost_usd", 0.0))
                for s in result.metrics.values()
                if s.samples is not None
            ),
            8,
        ),
    )


def summarise(samples: Sequence[Sample], margins: Mapping[str, float]) -> Repeat:
    """Flip rate, spread and the unstable flag of a case's samples (index order)."""
    from app.eval.report.records import Repeat

    reasons: list[str] = []
    failed = [s.index for s in samples if s.error is not None]
    if failed:
        reasons.append(f"sample(s) {', '.join(map(str, failed))} failed: stability unknown")
    outcomes = [(s.refused, s.passed) for s in samples if s.error is None]
    flip = 0.0
    if outcomes:
        _, most = Counter(outcomes).most_common(1)[0]
        flip = (len(outcomes) - most) / len(outcomes)
        if flip > 0:
            seen = ", ".join(f"{n}× {_outcome(o)}" for o, n in Counter(outcomes).most_common())
            reasons.append(f"outcome flipped across samples ({seen})")
    spread: dict[str, float] = {}
    table = specs()
    names = sorted({n for s in samples for n in s.values})
    for name in names:
        values = [v for s in samples if (v := s.values.get(name)) is not None]
        if len(values) < 2:
            continue
        spread[name] = round(max(values) - min(values), 9)
        spec = table.get(name)
        if spec is None or spec.group in NOT_COUNTED_GROUPS:
            continue
        margin = margins.get(name, 0.0)
        if spread[name] > margin + 1e-12:
            reasons.append(f"{name} spread {spread[name]:g} > margin {margin:g}")
    return Repeat(
        samples=list(samples),
        flip_rate=round(flip, 9),
        spread=spread,
        unstable=bool(reasons),
        reasons=reasons,
    )


def _outcome(outcome: tuple[bool | None, bool | None]) -> str:
    refused, passed = outcome
    what = "refused" if refused else "answered"
    return f"{what}/{'passed' if passed else 'failed'}"
