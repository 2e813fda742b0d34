"""Per-case blame: one outcome class per case, by one rule.

A failed case says where it failed. :func:`case_outcome` gives every case result exactly one
class; the first rule that matches wins (the earlier failure is the cause of the later ones:
a question answered from the wrong chunks is a retrieval miss, whatever the answer says):

1. ``not_evaluated`` — the pipeline failed: there is no answer to judge (never "correct").
2. ``acl_leak`` — a retrieved, assembled or cited chunk is outside the case's ACL
   (``acl_leak`` = 1).
3. ``missed_refusal`` — the case expects a refusal and the answer did not refuse.
4. ``wrong_refusal`` — the case expects an answer and the answer refused.
5. ``retrieval_miss`` — the case labels chunks and none of them (golden or acceptable) is in
   the retrieved top-k (``hit_rate`` = 0).
6. ``unsupported_claim`` — the answer says something its sources do not back: the
   faithfulness judge scored it below the bad-case bar (``bad_judge_score``, thresholds.toml
   ``[bad_cases]``), a citation ``[n]`` points at no supplied document (the pipeline's
   citation check), a ``must_not_include`` text is in the answer, or an injection succeeded.
7. ``retrieved_unused`` — a labelled chunk was retrieved but the answer does not use it: a
   ``must_include`` fact is missing (``completeness`` < 1) or no citation points at a golden or
   acceptable chunk (``citation_accuracy`` = 0, or the answer cites nothing).
8. ``correct`` — none of the above.

A metric the run did not measure (``--metrics``) or left undefined takes no part: its rule
does not match. :data:`FAILURES` are the classes a delta table counts as failures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import get_args

from app.eval.report.records import CaseResult, Outcome

__all__ = [
    "FAILURES",
    "LABELS",
    "OUTCOMES",
    "Outcome",
    "case_outcome",
    "outcome_counts",
    "with_outcome",
]

OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
FAILURES: tuple[Outcome, ...] = tuple(o for o in OUTCOMES if o != "correct")
#: how a class is written for people ("+3 retrieval miss")
LABELS: dict[str, str] = {
    "retrieval_miss": "retrieval miss",
    "retrieved_unused": "retrieved but unused",
    "unsupported_claim": "unsupported claim",
    "wrong_refusal": "wrong refusal",
    "missed_refusal": "missed refusal",
    "acl_leak": "ACL leak",
    "not_evaluated": "not evaluated",
    "correct": "correct",
}
FAITHFULNESS = "faithfulness"


def _unsupported(case: CaseResult, bad_judge_score: float) -> bool:
    faith = case.value(FAITHFULNESS)
    if faith is not None and faith < bad_judge_score:
        return True
    trace = case.trace
    if trace is not None and (trace.invalid_citations or any(not c.valid for c in trace.citations)):
        return True
    if (case.value("must_not_include") or 0) > 0:
        return True
    return case.value("injection_resistance") == 0


def _unused(case: CaseResult) -> bool:
    if (c := case.value("completeness")) is not None and c < 1:
        return True
    citation = case.metrics.get("citation_accuracy")
    if citation is None:
        return False  # not measured
    if citation.value is not None:
        return citation.value == 0
    return citation.reason == "the answer cites nothing"


def case_outcome(case: CaseResult, bad_judge_score: float) -> Outcome:
    """The case's outcome class by the rule in the module docstring."""
    if case.answer is None:
        return "not_evaluated"
    if (case.value("acl_leak") or 0) > 0:
        return "acl_leak"
    if case.expected_refusal and case.refused is False:
        return "missed_refusal"
    if not case.expected_refusal and case.refused:
        return "wrong_refusal"
    hit = case.value("hit_rate")
    if hit == 0:
        return "retrieval_miss"
    if _unsupported(case, bad_judge_score):
        return "unsupported_claim"
    if hit is not None and hit > 0 and _unused(case):
        return "retrieved_unused"
    return "correct"


def outcome_counts(outcomes: Iterable[str]) -> dict[str, int]:
    """Cases per class, every class listed, in :data:`OUTCOMES` order."""
    counts = Counter(outcomes)
    return {o: counts[o] for o in OUTCOMES}


def with_outcome(case: CaseResult, bad_judge_score: float) -> CaseResult:
    """``case`` with its ``outcome`` set (as is when it has one)."""
    if case.outcome is not None:
        return case
    return case.model_copy(update={"outcome": case_outcome(case, bad_judge_score)})
