"""A cached answer carries no latency: ``latency_s`` is undefined (with the reason) when a
model call of the case came from the response cache, so a warm rerun is never "faster"."""

from __future__ import annotations

from types import SimpleNamespace

from app.eval.scoring import MetricContext, Observation, score_case
from tests.unit.eval.test_metrics import case as make_case


def _obs(cached: int, calls: int) -> Observation:
    tokens = SimpleNamespace(cached_calls=cached, llm_calls=calls, input=10, output=5)
    return Observation("答案 [1]", False, latency_s=0.004, trace=SimpleNamespace(tokens=tokens))  # type: ignore[arg-type]


def test_a_cached_call_leaves_latency_undefined_and_says_cached() -> None:
    case = make_case()
    got = score_case(case, _obs(cached=1, calls=2), MetricContext())["latency_s"]
    assert got.value is None and got.reason is not None
    assert got.reason.startswith("cached: 1 of 2 model call(s)")


def test_a_measured_answer_keeps_its_latency() -> None:
    case = make_case()
    assert score_case(case, _obs(cached=0, calls=1), MetricContext())["latency_s"].value == 0.004
