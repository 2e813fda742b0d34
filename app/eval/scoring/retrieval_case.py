"""Per-case retrieval metrics: the trec_eval functions over the case's relevance labels.

Relevance labels (the case's qrels): ``golden_chunk_ids`` grade 2, ``acceptable_chunk_ids``
grade 1 (a chunk listed in both is golden). Every grade > 0 counts as relevant for Hit,
Recall and MRR; nDCG uses the grades as linear gains. The run is the trace's merged,
ranked retrieval list; when the pipeline refused before retrieving (an injection
refusal) the retrieval metrics are undefined (``null`` with that reason) — the refusal
is scored by ``refusal_error`` / ``injection_resistance`` instead.
"""

from __future__ import annotations

from app.eval.datasets.case import Case
from app.eval.scoring import retrieval
from app.eval.scoring.base import MetricContext, Observation, Score
from app.eval.scoring.registry import metric

GOLDEN_GRADE = 2.0
ACCEPTABLE_GRADE = 1.0
NO_LABELS = "no golden or acceptable chunks (nothing to retrieve)"
# pipeline modes that answer before retrieval; the refusal itself is scored by refusal_error
SKIPPED_RETRIEVAL = ("injection_refused",)


def qrels(case: Case) -> dict[str, float]:
    labels = {cid: ACCEPTABLE_GRADE for cid in case.acceptable_chunk_ids}
    labels.update({cid: GOLDEN_GRADE for cid in case.golden_chunk_ids})
    return labels


def _run(obs: Observation) -> list[str]:
    return list(dict.fromkeys(obs.retrieved))  # the first occurrence of each id, in order


#: the last case's (case, observation, run, qrels): the four metrics below read the same
#: two lists of one case (both objects are frozen, and held here, so identity is enough;
#: the retrieval functions only read them)
_LAST: list[tuple[Case, Observation, list[str], dict[str, float]]] = []


def _inputs(case: Case, obs: Observation) -> tuple[list[str], dict[str, float]]:
    if _LAST:
        last = _LAST[0]
        if last[0] is case and last[1] is obs:
            return last[2], last[3]
    run, labels = _run(obs), qrels(case)
    _LAST[:] = [(case, obs, run, labels)]
    return run, labels


def _score(value: float | None, obs: Observation) -> Score:
    if value is None:
        return Score.undefined(NO_LABELS)
    if obs.mode in SKIPPED_RETRIEVAL:  # the retriever was never asked: nothing to score
        return Score.undefined(f"retrieval did not run (mode {obs.mode})")
    return Score.shared(value, "retrieved", len(obs.retrieved))


@metric(
    "hit_rate",
    direction="higher",
    kind="deterministic",
    unit="rate",
    scale="binary",
    group="retrieval",
    description="Hit@k: a golden/acceptable chunk is in the top k (trec_eval success_k)",
)
def hit_rate(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    return _score(retrieval.hit_rate(*_inputs(case, obs), ctx.k), obs)


@metric(
    "recall",
    direction="higher",
    kind="deterministic",
    unit="ratio 0-1",
    scale="continuous",
    group="retrieval",
    description="Recall@k: relevant chunks in the top k / all relevant (trec_eval recall_k)",
)
def recall(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    return _score(retrieval.recall(*_inputs(case, obs), ctx.k), obs)


@metric(
    "mrr",
    direction="higher",
    kind="deterministic",
    unit="ratio 0-1",
    scale="continuous",
    group="retrieval",
    description="reciprocal rank of the first relevant chunk (trec_eval recip_rank)",
)
def mrr(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    return _score(retrieval.mrr(*_inputs(case, obs)), obs)


@metric(
    "ndcg",
    direction="higher",
    kind="deterministic",
    unit="ratio 0-1",
    scale="continuous",
    group="retrieval",
    description="nDCG@k, golden grade 2 / acceptable grade 1 (trec_eval ndcg_cut_k)",
)
def ndcg(case: Case, obs: Observation, ctx: MetricContext) -> Score:
    return _score(retrieval.ndcg(*_inputs(case, obs), ctx.k), obs)
