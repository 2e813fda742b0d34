"""Write a simulated day of answer-log traffic (answers + 👍/👎 feedback) for a prompt, with
the arms of a staged rollout chosen exactly as the runtime chooses them.

Every answer line has the fields the pipeline writes (``event``, ``trace_id``, ``ts``,
``prompt_version``, ``mode``, ``latency_ms``, ``citations``, ``cost_usd``, ``user``, ``arm``,
``arms`` …) and a ``synthetic: true`` mark; nothing here calls a model. Users arrive over the
window, each asks a few questions (geometric, mean ``--answers-per-user``); the user's arm is
:func:`app.generation.registry.rollout.in_candidate` — the same hash as
:meth:`PromptRegistry.choose` — so the share of users in the candidate arm is what the
runtime would serve. Each arm has its own 👎, refusal, invalid-citation rate, latency and cost:
plant a worse candidate with ``--candidate-down-rate`` and see ``rag ops ab`` flag it.

The rollout comes from ``releases.toml`` (``--root``: the prompts tree, default the shipped
one) or from ``--candidate`` / ``--percent``; with neither, the log is plain traffic on the
active version (no arms): a day to replay through a canary.

    python scripts/simulate_traffic.py --out logs/answers.jsonl \
        [--start 2026-12-05T00:00:00Z] [--hours 24] [--users 20000] [--seed 0] \
        [--prompt system/kb_qa] [--candidate v3 --percent 1] [--down-rate 0.05] \
        [--candidate-down-rate 0.07] [--append]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUESTIONS = [
    ("年假一年能休几天啊", ["employee"]),
    ("请病假要开证明吗", ["employee"]),
    ("出差住酒店一晚最多报多少钱", ["employee"]),
    ("报销单要谁批", ["employee"]),
    ("VPN老是断线怎么回事", ["employee"]),
    ("How much does the Nebula Starter plan cost per month?", ["public"]),
    ("Does Nebula Search support SSO login?", ["public"]),
    ("备用金能借多少", ["employee"]),
]


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("simulated_answers.jsonl"))
    ap.add_argument("--append", action="store_true", help="Append to --out (a later window).")
    ap.add_argument("--start", default="2026-12-05T00:00:00Z", help="Window start (UTC).")
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--users", type=int, default=20_000, help="Distinct users in the window.")
    ap.add_argument("--answers-per-user", type=float, default=2.0)
    ap.add_argument("--user-prefix", default="u", help="User ids are <prefix>-<n>.")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prompt", default="system/kb_qa")
    ap.add_argument("--root", type=Path, default=None, help="Prompts tree (releases.toml).")
    ap.add_argument("--candidate", default=None, help="Candidate version, e.g. v3.")
    ap.add_argument("--percent", type=float, default=None, help="Candidate share of users.")
    ap.add_argument("--model", default="offline:extractive")
    ap.add_argument("--down-rate", type=float, default=0.05, help="👎 per answer, control.")
    ap.add_argument("--candidate-down-rate", type=float, default=None)
    ap.add_argument("--refusal-rate", type=float, default=0.12)
    ap.add_argument("--candidate-refusal-rate", type=float, default=None)
    ap.add_argument("--bad-citation-rate", type=float, default=0.02)
    ap.add_argument("--latency-ms", type=float, default=1200.0, help="Median latency, control.")
    ap.add_argument("--candidate-latency-ms", type=float, default=None)
    ap.add_argument("--cost-usd", type=float, default=0.002)
    ap.add_argument("--candidate-cost-usd", type=float, default=None)
    args = ap.parse_args(argv)
    for name in ("users",):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be ≥ 1")
    if not 0 < args.hours <= 24 * 31:
        ap.error("--hours must be in (0, 744]")
    if args.answers_per_user < 1:
        ap.error("--answers-per-user must be ≥ 1")
    for name in ("down_rate", "candidate_down_rate", "refusal_rate", "candidate_refusal_rate",
                 "bad_citation_rate"):  # fmt: skip
        value = getattr(args, name)
        if value is not None and not 0 <= value <= 1:
            ap.error(f"--{name.replace('_', '-')} must be a probability in [0, 1]")
    if args.percent is not None and not 0 <= args.percent <= 100:
        ap.error("--percent must be in [0, 100]")
    return args


def _rollout(args: argparse.Namespace) -> tuple[int, int | None, float]:
    """(active version, candidate version or None, percent) from the flags or releases.toml."""
    from app.generation.registry import build_registry, default_root
    from app.generation.registry.releases import parse_version

    reg = build_registry(args.root or default_root())
    active = reg.active_version(args.prompt)
    rel = reg.releases.entries.get(args.prompt)
    candidate = rel.rollout.candidate if rel is not None and rel.rollout is not None else None
    percent = rel.rollout.percent if rel is not None and rel.rollout is not None else 0.0
    if args.candidate is not None:
        candidate = parse_version(args.candidate)
        if candidate is None:
            raise SystemExit(f"--candidate {args.candidate!r}: not a version like v3")
    if args.percent is not None:
        percent = args.percent
    return active, candidate, percent


def build(args: argparse.Namespace) -> list[dict[str, object]]:
    from app.generation.registry.releases import Rollout, parse_since
    from app.generation.registry.rollout import in_candidate

    rng = np.random.default_rng(args.seed)
    start = parse_since(args.start)
    active, candidate, percent = _rollout(args)
    rollout = Rollout(candidate, "sim", percent, args.start) if candidate is not None else None
    users = [f"{args.user_prefix}-{n:06d}" for n in range(args.users)]
    in_b = np.array(
        [rollout is not None and in_candidate(rollout, args.prompt, u) for u in users], dtype=bool
    )
    per_user = rng.geometric(1 / args.answers_per_user, size=args.users)
    owner = np.repeat(np.arange(args.users), per_user)
    n = owner.size
    seconds = np.sort(rng.uniform(0, args.hours * 3600, size=n))
    owner = rng.permutation(owner)  # answers in time order, users spread over the window
    arm_b = in_b[owner]

    def by_arm(control: float, cand: float | None) -> np.ndarray:
        return np.where(arm_b, control if cand is None else cand, control)

    down = rng.random(n) < by_arm(args.down_rate, args.candidate_down_rate)
    up = ~down & (rng.random(n) < 0.10)
    refused = rng.random(n) < by_arm(args.refusal_rate, args.candidate_refusal_rate)
    bad_cite = ~refused & (rng.random(n) < args.bad_citation_rate)
    latency = by_arm(args.latency_ms, args.candidate_latency_ms) * rng.lognormal(0, 0.35, n)
    cost = by_arm(args.cost_usd, args.candidate_cost_usd) * rng.lognormal(0, 0.2, n)
    question = rng.integers(0, len(QUESTIONS), n)
    delay = rng.uniform(30, 600, n)  # a rating comes within 10 minutes
    pid = args.prompt
    records: list[dict[str, object]] = []
    feedback: list[dict[str, object]] = []
    for i in range(n):
        when = start + timedelta(seconds=float(seconds[i]))
        version = f"{pid}_v{candidate if arm_b[i] else active}"
        text, acl = QUESTIONS[int(question[i])]
        trace = f"sim-{args.seed}-{args.user_prefix}-{i:07d}"
        record: dict[str, object] = {
            "event": "answer",
            "synthetic": True,
            "trace_id": trace,
            "ts": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "model": args.model,
            "mode": "refusal" if refused[i] else "strict",
            "question": text,
            "user_acl": acl,
            "answer": "资料中没有相关信息。" if refused[i] else "根据资料 [1]。",
            "prompt_version": version,
            "prompt_versions": {"qa": version},
            "latency_ms": round(float(latency[i]), 1),
            "context_chunk_ids": ["hr-policy#1"],
            "citations": [] if refused[i] or bad_cite[i] else [1],
            "cited_chunk_ids": [] if refused[i] or bad_cite[i] else ["hr-policy#1"],
            "invalid_citations": [3] if bad_cite[i] else [],
            "tokens": {"input": 900, "output": 120, "llm_calls": 1, "cached_calls": 0},
            "cost_usd": round(float(cost[i]), 6),
            "user": users[int(owner[i])],
            "arm": "candidate" if arm_b[i] else "control",
            "arms": {}
            if rollout is None
            else {pid: {"arm": "candidate" if arm_b[i] else "control", "version": version}},
        }
        records.append(record)
        if down[i] or up[i]:
            feedback.append(
                {
                    "event": "feedback",
                    "synthetic": True,
                    "trace_id": trace,
                    "user": users[int(owner[i])],
                    "rating": "down" if down[i] else "up",
                    "ts": (when + timedelta(seconds=float(delay[i]))).strftime(
                        "%Y-%m-%dT%H:%M:%SZ"
                    ),
                }
            )
    return records + feedback


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    records = build(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    with args.out.open("a" if args.append else "w", encoding="utf-8") as f:
        f.write(body)
    answers = sum(1 for r in records if r["event"] == "answer")
    candidate = sum(1 for r in records if r.get("arm") == "candidate")
    print(
        f"wrote {answers} answers ({candidate} from the candidate arm) and "
        f"{len(records) - answers} feedback lines to {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
