"""Chaos benchmark (`make bench`): a nightly against a provider that misbehaves (issue 12).

Two runs of the real ``rag eval run`` (a subprocess each, ``--no-cache``) over the same
1,000-case suite (every shipped case in turn, :mod:`tests.support.chaos_run`), against
:mod:`tests.support.chaos_server` started in its own process on 127.0.0.1:

1. the **fault-free** twin (same answers, no faults): the time and request baseline;
2. the **chaos** run, issue 12's mix, seeded: 10 % 429 with ``Retry-After: 1``, 5 % 500,
   2 % hangs (past ``--timeout``), 2 % malformed judge JSON, 1 % bad bodies (HTML, ``null``
   message, cut JSON, no choices, wrong content type, …). Each request's fault is keyed by
   the request (its body and how many times that body came before), not by arrival order:
   the same requests get the same faults in every run, so two commits that send the same
   requests get the same counts (up to a call that gives up after 4 failed attempts, which
   depends on which of several identical requests drew them).

Both use the same settings: ``--concurrency 16 --timeout 1``, 0.1 s server latency (so the
timeout is 10× a normal answer). Printed: crashes (exit code other than 0/1, or a
traceback), lost cases, errored cases, cases whose metrics differ from the twin, judge
samples scored from a malformed reply, extra requests, and the time ratio, with the load
average (the machine may be shared).

Targets: 0 crashes, 0 lost, ≤ 1 % of cases errored, ≤ 1.5× the fault-free time, 0 differing,
0 malformed replies scored. ``--strict`` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchrows import row  # noqa: E402  (scripts/, on sys.path when run as a script)

from tests.support.chaos_run import (  # noqa: E402
    eval_args,
    make_root,
    outcome,
    rag_env,
    run_rag,
    start_server,
)
from tests.support.chaos_server import CHAOS_SCORE  # noqa: E402

TARGET_ERRORED, TARGET_TIME = 0.01, 1.5


def _run(tmp: Path, root: Path, name: str, server_args: list[str], run_args: list[str]) -> tuple:
    server = start_server(*server_args)
    try:
        run = run_rag(
            eval_args(server.base_url, tmp / f"out-{name}", *run_args),
            rag_env(root, tmp / f"cache-{name}"),
        )
        stats = server.stats()
    finally:
        server.stop()
    return run, stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    run_args = ["--concurrency", str(args.concurrency), "--timeout", str(args.timeout)]
    with tempfile.TemporaryDirectory(prefix="bench-chaos-") as tmp_name:
        tmp = Path(tmp_name)
        root, ids = make_root(tmp, args.cases)
        latency = ["--latency", str(args.latency)]
        calm, calm_stats = _run(tmp, root, "calm", ["--no-faults", *latency], run_args)
        chaos, chaos_stats = _run(
            tmp, root, "chaos", ["--seed", str(args.seed), "--hang-s", "30", *latency], run_args
        )
    load_after = os.getloadavg()

    twin = outcome([calm], ids, good_score=CHAOS_SCORE)
    got = outcome([chaos], ids, good_score=CHAOS_SCORE, twin=calm.report)
    n = len(ids)
    errored_share = got.errored / n
    ratio = chaos.seconds / calm.seconds
    extra = chaos_stats["requests"] - calm_stats["requests"]
    engine = (chaos.report or {}).get("totals", {}).get("engine", {})
    adapted = next(iter((engine.get("concurrency") or {}).values()), {})
    print(
        f"chaos benchmark: {n} cases, concurrency {args.concurrency}, timeout {args.timeout:g}s, "
        f"latency {args.latency:g}s, seed {args.seed}; load average "
        f"{load_before[0]:.2f} → {load_after[0]:.2f}"
    )
    print(f"faults injected: {chaos_stats.get('faults')}")
    print(
        f"fault-free run: {calm.seconds:.1f}s, {calm_stats['requests']} requests, exit "
        f"{calm.returncode}, crashes {twin.crashes}, lost {twin.lost}, errored {twin.errored}"
    )
    print(
        f"chaos run:      {chaos.seconds:.1f}s, {chaos_stats['requests']} requests, exit "
        f"{chaos.returncode}; retries {engine.get('retries')}, throttled "
        f"{engine.get('throttled')}, timeouts {engine.get('timeouts')}, malformed replies "
        f"{engine.get('malformed_replies')}, failed calls {engine.get('errors')}; concurrency "
        f"{adapted.get('ceiling')} → min {adapted.get('min')} ({adapted.get('decreases')} "
        f"decreases)"
    )
    rows = [
        ("crashes", got.crashes + twin.crashes, "0", got.crashes + twin.crashes == 0),
        ("lost cases", got.lost, "0", got.lost == 0 and twin.lost == 0),
        (
            "errored cases",
            f"{got.errored} ({errored_share:.2%})",
            f"<= {TARGET_ERRORED:.0%}",
            errored_share <= TARGET_ERRORED,
        ),
        ("differ from fault-free", got.differs, "0", got.differs == 0),
        ("malformed judge replies scored", got.scored_malformed, "0", got.scored_malformed == 0),
        (
            "errored by judge reply+repair",
            got.errored_malformed_twice,
            "(reported)",
            True,
        ),
        (
            "extra requests",
            f"{extra} (+{extra / max(1, calm_stats['requests']):.1%})",
            "(reported)",
            True,
        ),
        ("time ratio chaos / fault-free", f"{ratio:.2f}x", f"<= {TARGET_TIME}x", ratio <= 1.5),
    ]
    print(f"{'measure':32} {'value':>22}  {'target':>10}")
    for name, value, target, ok in rows:
        print(f"{name:32} {value!s:>22}  {target:>10}  {'ok' if ok else 'MISS'}")
        reported = target == "(reported)"
        row(
            "chaos",
            f"{args.cases} cases under faults: {name}",
            "—" if reported else target,
            str(value),
            None if reported else ok,
        )
    for line in (twin.details + got.details)[:10]:
        print(f"  - {line}")
    misses = [name for name, _, _, ok in rows if not ok]
    if misses:
        print(f"missed: {', '.join(misses)}")
    return 1 if misses and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
