"""Score the offline pipeline (``offline:extractive`` + ``offline:reference-judge``) per suite.

Runs each suite through :func:`app.eval.run.runner.run` (no report written, no response cache,
checkpoints in a temporary folder) and prints one row per suite with the mean of
completeness, correctness, citation accuracy, refusal error and faithfulness, plus
injection resistance and must_not_include on the suites that define them, and the
ACL-leak red line (its mean must stay 0).

    .venv/bin/python scripts/score_baseline.py                      # full smoke hard adversarial
    .venv/bin/python scripts/score_baseline.py --suite full --json out.json
    .venv/bin/python scripts/score_baseline.py --suite adversarial --injection-policy refuse
    .venv/bin/python scripts/score_baseline.py --retriever bm25     # the lexical path only

Besides the means it prints Hit@5 (``hit``), Hit@5 on the cases tagged ``cross-lingual``
(``xl_hit``), and the refusal counts: answerable cases refused (``false_ref``) and
expected-refusal cases answered (``missed_ref``).

``full`` is the development set of the extractive baseline; ``smoke`` and ``hard`` are the
held-out sets (report them, do not tune on them). ``--injection-policy`` overrides
``PipelineConfig.injection_policy`` for the run (default: the pipeline's own default).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

METRICS = (
    "completeness",
    "correctness",
    "citation_accuracy",
    "refusal_error",
    "faithfulness",
    "injection_resistance",
    "must_not_include",
    "acl_leak",
)
SUITES = ("full", "smoke", "hard", "adversarial")


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def score(
    suite: str, policy: str | None, judge_samples: int, retriever: str = "auto"
) -> dict[str, Any]:
    import pydantic

    from app.eval.config import RunConfig
    from app.eval.run.runner import run_sync
    from app.generation.pipeline import generator

    original = generator.PipelineConfig
    if policy:  # the factory builds ``generator.PipelineConfig``: swap in another default
        generator.PipelineConfig = pydantic.create_model(  # type: ignore[misc]
            "PipelineConfig", __base__=original, injection_policy=(str, policy)
        )
    try:
        with tempfile.TemporaryDirectory() as tmp:
            outcome = run_sync(
                RunConfig(
                    suite=suite, judge_samples=judge_samples, cache=False, retriever=retriever
                ),
                write=False,
                runs_root=Path(tmp),
            )
    finally:
        generator.PipelineConfig = original  # type: ignore[misc]
    cases = outcome.report.cases
    row: dict[str, Any] = {"suite": suite, "n": len(cases), "policy": policy or "default"}
    for name in METRICS:
        vals = [v for c in cases if (v := c.value(name)) is not None]
        row[name] = _mean(vals)
        row[f"{name}_n"] = len(vals)
    hits = [v for c in cases if (v := c.value("hit_rate")) is not None]
    xl = [v for c in cases if "cross-lingual" in c.tags and (v := c.value("hit_rate")) is not None]
    row["hit"] = _mean(hits)
    row["xl_hit"] = _mean(xl)
    cells = [
        (c.metrics["refusal_error"].detail or {}).get("cell")
        if "refusal_error" in c.metrics
        else None
        for c in cases
    ]
    row["false_ref"] = sum(cell == "false_refusal" for cell in cells)
    row["missed_ref"] = sum(cell == "missed_refusal" for cell in cells)
    row["retriever"] = outcome.report.meta.retrieval.get("name")
    row["cases"] = [
        {
            "id": c.id,
            "answer": c.answer,
            "mode": c.trace.mode if c.trace is not None else None,
            "metrics": {k: c.value(k) for k in (*METRICS, "hit_rate") if k in c.metrics},
        }
        for c in cases
    ]
    return row


def _fmt(value: float | None) -> str:
    return "   —  " if value is None else f"{value:6.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="append", choices=SUITES, help="repeatable")
    parser.add_argument("--injection-policy", choices=("refuse", "clean", "alert"))
    parser.add_argument("--judge-samples", type=int, default=1)
    parser.add_argument("--retriever", choices=("auto", "hybrid", "bm25"), default="auto")
    parser.add_argument("--json", type=Path, help="write the rows (with per-case values) here")
    args = parser.parse_args(argv)
    rows = [
        score(s, args.injection_policy, args.judge_samples, args.retriever)
        for s in args.suite or SUITES
    ]
    short = ("compl", "correct", "cite_acc", "refus_err", "faithful", "inj_res", "mni", "acl_leak")
    extra = ("hit", "xl_hit")
    print(
        f"retriever: {rows[0]['retriever'] if rows else '?'}\n{'suite':<12} {'n':>4} "
        + " ".join(f"{h:>9}" for h in (*short, *extra, "false_ref", "missed_ref"))
    )
    for row in rows:
        print(
            f"{row['suite']:<12} {row['n']:>4} "
            + " ".join(f"{_fmt(row[m]):>9}" for m in (*METRICS, *extra))
            + f" {row['false_ref']:>9} {row['missed_ref']:>10}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
