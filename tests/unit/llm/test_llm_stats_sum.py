"""EngineStats.summed: the counters of every process of a resumed run (issue 12)."""

from __future__ import annotations

from app.llm.engine import EngineStats


def test_counters_of_processes_add_up() -> None:
    a = EngineStats(calls=6370 - 1246, completions=10, retries=3, cost_usd=0.5)
    a.by_provider = {"openai:x": 5}
    a.retry_budget = {"cap": None, "requests": 100, "used": 3, "allowed": 150, "refused": 0}
    a.concurrency = {
        "openai@u": {
            "ceiling": 8,
            "final": 4,
            "min": 2,
            "decreases": 2,
            "increases": 1,
            "throttled_replies": 9,
            "events": [{"t_s": 1.0, "limit": 4, "why": "x"}],
        }
    }
    b = EngineStats(calls=1246, completions=4, retries=1, cost_usd=0.25)
    b.by_provider = {"openai:x": 2, "openai:y": 1}
    b.retry_budget = {"cap": None, "requests": 40, "used": 1, "allowed": 120, "refused": 2}
    b.concurrency = {
        "openai@u": {
            "ceiling": 8,
            "final": 8,
            "min": 8,
            "decreases": 0,
            "increases": 0,
            "throttled_replies": 1,
            "events": [],
        }
    }
    total = EngineStats.summed([a, b])
    assert total.calls == 6370 and total.completions == 14 and total.retries == 4
    assert total.cost_usd == 0.75
    assert total.by_provider == {"openai:x": 7, "openai:y": 1}
    assert total.retry_budget["requests"] == 140 and total.retry_budget["refused"] == 2
    adapted = total.concurrency["openai@u"]
    assert (adapted["min"], adapted["final"], adapted["decreases"]) == (2, 8, 2)
    assert adapted["throttled_replies"] == 10 and len(adapted["events"]) == 1
    assert EngineStats.summed([]) == EngineStats()


def test_as_dict_and_copy_are_what_dataclasses_asdict_gives_and_share_nothing() -> None:
    import dataclasses

    s = EngineStats(calls=3, cache_hits=2, cost_usd=0.125)
    s.by_provider = {"openai:x": 3}
    s.retry_budget = {"cap": None, "requests": 3}
    s.concurrency = {"openai@u": {"ceiling": 8, "events": [{"t_s": 1.0, "why": ("a", "b")}]}}
    got = s.as_dict()
    assert got == dataclasses.asdict(s) and list(got) == list(dataclasses.asdict(s))
    got["concurrency"]["openai@u"]["events"].append({})
    got["by_provider"]["openai:y"] = 1
    assert s.concurrency["openai@u"]["events"] == [{"t_s": 1.0, "why": ("a", "b")}]
    copy = s.copy()
    assert copy == s and copy.by_provider is not s.by_provider


def test_a_one_process_run_reports_the_cost_rounded_as_a_several_process_run_does() -> None:
    """Calls finish in a different order from run to run, and float addition is not
    associative (0.1 + 0.2 + 0.3 != 0.3 + 0.2 + 0.1): the reported total must not depend on
    the order, so a one-process run's counters are rounded like ``summed``'s."""
    from types import SimpleNamespace

    from app.eval.run.case import summed_stats

    forward, backward = EngineStats(), EngineStats()
    for cost in (0.1, 0.2, 0.3):
        forward.cost_usd += cost
    for cost in (0.3, 0.2, 0.1):
        backward.cost_usd += cost
    assert forward.cost_usd != backward.cost_usd  # the premise: the order shows
    one = summed_stats(SimpleNamespace(stats=forward), [])
    other = summed_stats(SimpleNamespace(stats=backward), [])
    assert one is not None and other is not None
    assert one.cost_usd == other.cost_usd == 0.6
    several = summed_stats(SimpleNamespace(stats=forward), [EngineStats()])
    assert several is not None and several.cost_usd == one.cost_usd
