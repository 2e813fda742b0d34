"""Calibration of the [0, 1] retrieval score against the assembly floors, per golden suite.

For every case of each suite the query (the ``golden_rewrite`` for multi-turn cases — the
rewrite module is evaluated separately — else the question) is searched on the sample KB
with the case's ACL, and :func:`app.generation.pipeline.assembly.select` picks the mode with the
default floors (refusal < 0.45 ≤ assisted < 0.88 ≤ strict). Cases fall into four groups:

* ``gold@1``     answerable, a golden/acceptable chunk is the top-1 hit
* ``gold@2-k``   answerable, the first golden/acceptable chunk is at rank 2..k
* ``missed``     answerable, no golden/acceptable chunk in the top k (or no hits at all)
* ``refusal``    ``expected_refusal`` is true (out of scope, or not readable for the ACL)

For each group it prints the top-1 score distribution and the mode counts, and for each
suite Hit@k over the answerable cases (trec_eval ``success_k`` with golden ∪ acceptable
as relevant). ``--save FILE`` stores the numbers as JSON; ``--baseline FILE`` prints a
before → after table against such a file.

    .venv/bin/python scripts/calibrate_retrieval.py --save /tmp/before.json
    .venv/bin/python scripts/calibrate_retrieval.py --baseline /tmp/before.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.eval.datasets.case import Case, load_suite  # noqa: E402
from app.generation.pipeline.assembly import Floors, select  # noqa: E402
from app.paths import kb_dir  # noqa: E402
from app.retrieval.index import Retriever  # noqa: E402
from app.retrieval.kb import load_kb  # noqa: E402

SUITES = ("smoke", "full", "hard", "adversarial")
GROUPS = ("gold@1", "gold@2-k", "missed", "refusal")
MODES = ("strict", "assisted", "refusal", "no_hits")


def query_of(case: Case) -> str:
    return case.golden_rewrite if case.history and case.golden_rewrite else case.question


def group_of(case: Case, ranked: list[str]) -> tuple[str, bool]:
    """The case's group and whether a relevant chunk is in the top k."""
    relevant = set(case.golden_chunk_ids) | set(case.acceptable_chunk_ids)
    hit = any(cid in relevant for cid in ranked)
    if case.expected_refusal:
        return "refusal", hit
    if ranked and ranked[0] in relevant:
        return "gold@1", hit
    return ("gold@2-k" if hit else "missed"), hit


def _quantiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    v = sorted(values)
    q = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else [v[0]] * 3
    return {"min": v[0], "p25": q[0], "median": q[1], "p75": q[2], "max": v[-1]}


def calibrate(suite_name: str, retriever: Retriever, k: int, floors: Floors) -> dict[str, Any]:
    suite = load_suite(suite_name, version="1.0")
    groups: dict[str, dict[str, Any]] = {
        g: {"n": 0, "scores": [], "modes": dict.fromkeys(MODES, 0)} for g in GROUPS
    }
    answerable = hits_at_k = 0
    cases: dict[str, dict[str, Any]] = {}
    for case in suite.cases:
        hits = retriever.search(query_of(case), case.acl, k)
        ranked = [h.chunk_id for h in hits]
        group, hit = group_of(case, ranked)
        mode = select(hits, floors).mode
        top1 = hits[0].score if hits else 0.0
        g = groups[group]
        g["n"] += 1
        g["scores"].append(top1)
        g["modes"][mode] += 1
        if not case.expected_refusal and (case.golden_chunk_ids or case.acceptable_chunk_ids):
            answerable += 1
            hits_at_k += hit
        cases[case.id] = {"group": group, "mode": mode, "top1": round(top1, 4)}
    out: dict[str, Any] = {
        "suite": suite_name,
        "n": len(suite.cases),
        "hit_at_k": hits_at_k / answerable if answerable else None,
        "answerable": answerable,
        "groups": {},
        "cases": cases,
    }
    for name, g in groups.items():
        scores: list[float] = g["scores"]
        out["groups"][name] = {
            "n": g["n"],
            "modes": g["modes"],
            "ge_low": sum(s >= floors.low for s in scores),
            "dist": {key: round(val, 3) for key, val in _quantiles(scores).items()},
        }
    return out


def _answerable_modes(res: dict[str, Any]) -> dict[str, int]:
    total = dict.fromkeys(MODES, 0)
    for name in ("gold@1", "gold@2-k", "missed"):
        for mode, n in res["groups"][name]["modes"].items():
            total[mode] += n
    return total


def _modes(m: dict[str, int]) -> str:
    return "/".join(str(m[x]) for x in MODES)


def print_report(results: list[dict[str, Any]], k: int) -> None:
    print(f"modes are strict/assisted/refusal/no_hits; dist = min p25 median p75 max; k={k}")
    for res in results:
        hk = res["hit_at_k"]
        hit = f"Hit@{k} = {hk:.3f}" if hk is not None else f"Hit@{k} = n/a"
        print(f"\n== {res['suite']} (n={res['n']}, answerable={res['answerable']})  {hit}")
        print(f"  {'group':<9} {'n':>4}  {'modes s/a/r/nh':<16} {'≥low':>5}  dist")
        for name in GROUPS:
            g = res["groups"][name]
            d = g["dist"]
            dist = " ".join(f"{d[x]:.3f}" for x in ("min", "p25", "median", "p75", "max") if d)
            print(f"  {name:<9} {g['n']:>4}  {_modes(g['modes']):<16} {g['ge_low']:>5}  {dist}")
        print(f"  answerable modes: {_modes(_answerable_modes(res))}")


def print_comparison(before: list[dict[str, Any]], after: list[dict[str, Any]], k: int) -> None:
    print(f"\nbefore → after (modes strict/assisted/refusal/no_hits, Hit@{k})")
    header = f"{'suite':<12} {'Hit@k':<13} {'answerable modes':<30} {'gold@1 ≥0.45':<16}"
    print(header + f"{'refusal-case modes':<22} {'refusal <0.45':<14}")
    by_name = {r["suite"]: r for r in before}
    for res in after:
        old = by_name.get(res["suite"])
        if old is None:
            continue
        g1o, g1n = old["groups"]["gold@1"], res["groups"]["gold@1"]
        ro, rn = old["groups"]["refusal"], res["groups"]["refusal"]
        below_o = ro["n"] - ro["ge_low"]
        below_n = rn["n"] - rn["ge_low"]
        g1_old, g1_new = f"{g1o['ge_low']}/{g1o['n']}", f"{g1n['ge_low']}/{g1n['n']}"
        print(
            f"{res['suite']:<12} "
            f"{old['hit_at_k']:.3f}→{res['hit_at_k']:.3f}   "
            f"{_modes(_answerable_modes(old)):>14}→{_modes(_answerable_modes(res)):<15} "
            f"{g1_old + '→' + g1_new:<16}"
            f"{_modes(ro['modes']):>10}→{_modes(rn['modes']):<11} "
            f"{below_o}/{ro['n']}→{below_n}/{rn['n']}"
        )
    changed = []
    for res in after:
        old = by_name.get(res["suite"])
        if old is None:
            continue
        for cid, c in res["cases"].items():
            o = old["cases"].get(cid)
            if o and o["mode"] != c["mode"]:
                changed.append(
                    (res["suite"], cid, c["group"], o["mode"], c["mode"], o["top1"], c["top1"])
                )
    if changed:
        print(f"\n{len(changed)} cases changed mode:")
        for suite, cid, group, om, nm, os_, ns in changed:
            print(f"  {suite:<11} {cid:<20} {group:<9} {om:>8} {os_:.3f} → {nm:<8} {ns:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--suites", nargs="+", default=list(SUITES))
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--save", type=Path, help="write the numbers as JSON")
    parser.add_argument("--baseline", type=Path, help="a --save file to compare against")
    args = parser.parse_args(argv)
    floors = Floors()
    retriever = Retriever(load_kb(kb_dir()))
    results = [calibrate(name, retriever, args.k, floors) for name in args.suites]
    print_report(results, args.k)
    if args.baseline:
        print_comparison(json.loads(args.baseline.read_text("utf-8")), results, args.k)
    if args.save:
        args.save.write_text(json.dumps(results, ensure_ascii=False, indent=1), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
