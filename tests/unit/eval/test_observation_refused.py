"""observation_from_answer: an answer equal to the prompt's rejection answer after
normalisation (NFKC, case, whitespace) is a refusal; the rejection's normal form is
computed once per text, and a different rejection text is compared as itself."""

from __future__ import annotations

from app.eval.run.observe import observation_from_answer
from app.generation.pipeline.trace import Answer, RewriteTrace, Trace
from app.text.refusal import _normal_rejection

REJECTION = "抱歉，根据现有资料无法确定。Please contact HR."


def _answer(text: str, mode: str = "assisted") -> Answer:
    trace = Trace(
        trace_id="t",
        created_at="2026-12-01T00:00:00Z",
        model="m",
        user_acl=["public"],
        question="q",
        rewritten_query="q",
        rewrite=RewriteTrace(strategy="off", triggered=False),
        mode=mode,  # type: ignore[arg-type]
        context_chunk_ids=["a", "b"],
    )
    return Answer(text=text, trace=trace)


def test_rejection_answer_modulo_normalisation_is_refused() -> None:
    _normal_rejection.cache_clear()
    # full-width comma and letters, other case, extra whitespace: the same text normalised
    variant = "抱歉,根据现有资料无法确定。ＰＬＥＡＳＥ   contact hr. "
    assert observation_from_answer(_answer(variant), REJECTION).refused
    assert observation_from_answer(_answer(REJECTION), REJECTION).refused
    assert _normal_rejection.cache_info().misses == 1  # computed once for both cases
    assert not observation_from_answer(_answer("年假可以结转 [1]。"), REJECTION).refused
    # another rejection text is its own entry, not the first one's
    assert observation_from_answer(_answer("No answer."), "no  ANSWER.").refused
    assert not observation_from_answer(_answer(REJECTION), "no  ANSWER.").refused
    assert not observation_from_answer(_answer(REJECTION), None).refused


def test_refusal_modes_and_citations() -> None:
    obs = observation_from_answer(_answer("x [2][9]", mode="no_hits"), None)
    assert obs.refused and obs.cited == (2, 9) and obs.assembled == ("a", "b")
