"""The chaos server's fault schedule is a function of the requests, not of their arrival order.

The chaos benchmark counts errored cases (a judge reply and its repair both malformed);
with faults drawn from one RNG in arrival order, the client's timing decided which request
got which fault, and the same code on the same seed gave different counts run to run.
"""

from __future__ import annotations

import random
from typing import Any

from tests.support.chaos_server import JUDGE_MARK, FaultChooser, FaultMix


def _requests() -> list[dict[str, Any]]:
    """Judge and answer bodies; each judge body three times (a judge's samples are
    identical requests), each answer body twice (a suite case repeated)."""
    bodies: list[dict[str, Any]] = []
    for i in range(60):
        judge = {"messages": [{"role": "user", "content": f"{JUDGE_MARK} case {i}"}]}
        answer = {"messages": [{"role": "user", "content": f"<用户提问>\nq{i}\n</用户提问>"}]}
        bodies += [judge] * 3 + [answer] * 2
    return bodies


def _fates(chooser: FaultChooser, bodies: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each body's faults in the order its copies were served (what the run sees)."""
    fates: dict[str, list[str]] = {}
    for n, body in enumerate(bodies):
        action = chooser(n, body)
        key = body["messages"][0]["content"]
        fates.setdefault(key, []).append("ok" if action is None else repr(action))
    return fates


def test_the_same_requests_in_another_order_draw_the_same_faults() -> None:
    bodies = _requests()
    shuffled = list(bodies)
    random.Random(3).shuffle(shuffled)
    mix = FaultMix(rate_limited=0.2, server_error=0.1, hang=0.1, bad_judge_json=0.2, bad_body=0.1)
    arrived = FaultChooser(mix, seed=12)
    reordered = FaultChooser(mix, seed=12)
    assert _fates(arrived, bodies) == _fates(reordered, shuffled)
    assert arrived.counts == reordered.counts
    assert arrived.counts["bad_judge_json"] > 0 and arrived.counts["rate_limited"] > 0


def test_a_repeated_body_draws_anew_and_another_seed_differs() -> None:
    body = {"messages": [{"role": "user", "content": f"{JUDGE_MARK} one case"}]}
    mix = FaultMix(rate_limited=0.3, server_error=0.0, hang=0.0, bad_judge_json=0.3, bad_body=0.0)
    chooser = FaultChooser(mix, seed=1)
    fates = [chooser(n, body) for n in range(40)]
    assert None in fates and any(f is not None for f in fates)  # a retry is a new draw
    other = FaultChooser(mix, seed=2)
    assert [other(n, body) for n in range(40)] != fates
