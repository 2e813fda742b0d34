"""Human renderings of a :class:`~app.eval.report.records.Report`: the markdown summary written
beside every report, the terminal table's rows, and the histogram bars the viewer's pages
draw (:mod:`app.view`, also ``rag report html``). They only read the typed report; the bad cases, verdicts and
numbers are the report's own, never recomputed here.
"""

from __future__ import annotations

from typing import TypedDict

from app.eval.report.records import Histogram, ReportSummary, Totals
from app.eval.report.status import status_line

__all__ = [
    "Bar",
    "bars",
    "cost_text",
    "gate_role",
    "red_line_gate",
    "render_markdown",
    "summary_rows",
]


def _fmt(value: object, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def cost_text(totals: Totals) -> str:
    """``$0.0123``; a call to a model missing from the price table has an unknown cost, so
    it is said: ``unpriced (3 call(s) …)`` — never ``$0.0000`` for money that was spent."""
    unpriced = totals.engine.unpriced_calls if totals.engine is not None else 0
    if not unpriced:
        return f"${totals.cost_usd:.4f}"
    note = f"unpriced ({unpriced} call(s) to a model without a price)"
    return f"${totals.cost_usd:.4f} + {note}" if totals.cost_usd > 0 else note


_VERDICT_MARK = {
    "pass": "✅ pass",
    "fail": "❌ FAIL",
    "no_data": "· no data",
    "not_measured": "❌ NOT MEASURED",
}


def not_measured(report: ReportSummary) -> list[str]:
    """The gated metrics the run did not measure (``--metrics``); each one fails the run."""
    return [n for n, v in report.verdicts.items() if v.verdict == "not_measured"]


def gate_role(report: ReportSummary, metric: str) -> str:
    """What a verdict is under ``--gate red-lines``: ``red line`` (it sets the exit code), else
    ``baseline-only`` on an offline candidate (a sentence-picker is not held to a model's bar)
    or ``not gating`` on a model — reported, never setting the exit code."""
    if metric in report.red_line_metrics:
        return "red line"
    return "baseline-only" if report.meta.candidate.offline else "not gating"


def red_line_gate(report: ReportSummary) -> tuple[list[str], list[str]]:
    """``(red lines failed, quality verdicts failed)`` — the ``--gate red-lines`` rule: a
    red-line metric whose verdict is ``fail`` or ``not_measured`` fails the gate (so does a
    partial run); every other failed verdict is reported only."""
    red = set(report.red_line_metrics)
    failed = [n for n, v in report.verdicts.items() if v.verdict in ("fail", "not_measured")]
    return [n for n in failed if n in red], [n for n in failed if n not in red]


def summary_rows(report: ReportSummary, gate: str | None = None) -> list[list[str]]:
    """metric, n, errors, mean, std, 95 % CI, threshold, verdict — one row per metric.

    Under the red-lines gate (``gate``, default the report's) each verdict says what it is:
    ``red line`` or ``baseline-only`` / ``not gating`` (:func:`gate_role`)."""
    gate = gate or report.meta.config.gate
    rows: list[list[str]] = []
    for name, dist in report.summary.items():
        verdict = report.verdicts.get(name)
        mark = _VERDICT_MARK[verdict.verdict] if verdict else ""
        if verdict and gate == "red-lines":
            mark += f" · {gate_role(report, name)}"
        ci = dist.ci95
        rows.append(
            [
                name,
                str(dist.n),
                str(dist.n_errors),
                _fmt(dist.mean),
                _fmt(dist.std),
                f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "—",
                verdict.threshold if verdict else "",
                mark,
            ]
        )
    return rows


def evaluated_line(report: ReportSummary) -> str:
    """``evaluated N of M cases`` (N: run without an error; M: planned), and what is missing."""
    totals = report.totals
    evaluated = totals.cases_done - totals.cases_with_errors
    text = f"evaluated {evaluated} of {totals.cases_planned} cases"
    gaps = []
    if totals.cases_with_errors:
        gaps.append(f"{totals.cases_with_errors} with errors")
    if totals.cases_done < totals.cases_planned:
        gaps.append(f"{totals.cases_planned - totals.cases_done} not run")
    return text + (f" ({', '.join(gaps)})" if gaps else "")


def repeat_line(report: ReportSummary) -> str | None:
    """``--repeat K``: how many cases were unstable across their samples, or that an offline
    baseline was asked once (:mod:`app.eval.run.repeat`); None: asked once, no --repeat."""
    k, unstable = report.meta.config.repeat, report.totals.cases_unstable
    if unstable is not None:
        return (
            f"--repeat {k}: unstable cases {unstable} of {report.totals.cases_done} (the "
            "outcome flipped or a score spread beyond its margin across the samples: each "
            "case's repeat record in the report says why; rag eval compare leaves them out of "
            "its verdicts)"
        )
    if k > 1 and report.meta.candidate.offline:
        return (
            f"--repeat {k}: the candidate {report.meta.candidate.provider} is an offline "
            f"baseline and deterministic — its {k} samples would be identical, so each case "
            "was asked once (no flip rate or spread measured)"
        )
    return None


def outcomes_line(report: ReportSummary) -> str:
    """``Outcomes: 39 correct · 3 retrieved but unused · 1 wrong refusal`` (the classes with
    cases, the rule in :mod:`app.eval.report.outcome`)."""
    from app.eval.report.outcome import LABELS

    shown = [f"{n} {LABELS.get(o, o)}" for o, n in report.outcomes.items() if n]
    return "Outcomes: " + (" · ".join(shown) or "no cases")


def render_markdown(report: ReportSummary) -> str:
    meta = report.meta
    judge = meta.judge
    totals = report.totals
    lines = [
        f"# Evaluation {report.run_id} — {meta.suite} — {status_line(report)}",
        "",
        f"- created: {report.created_at}; git {meta.git.sha or '?'}"
        + (" (dirty)" if meta.git.dirty else ""),
        f"- candidate: `{meta.candidate.provider}`"
        + (" (offline baseline — not a model's numbers)" if meta.candidate.offline else ""),
        f"- judge: `{judge.provider}` × {judge.samples} samples"
        + (" (offline reference judge)" if judge.offline else "")
        + (" — WEAK JUDGE: its metrics never gate" if judge.weak else ""),
        "- prompts: " + ", ".join(f"`{p.version}`" for p in meta.prompts.values()),
        "- datasets: "
        + ", ".join(f"{d.name} v{d.version} ({d.sha256[:12]}…)" for d in meta.datasets),
        f"- cases: {evaluated_line(report)}"
        f"; judge errors: {totals.judge_errors}; cost {cost_text(totals)}",
    ]
    from app.eval.report.notes import unlisted_note

    if note := unlisted_note(meta):
        lines.append(f"- {note}")
    if report.partial:
        lines.append(f"- **PARTIAL**: {report.partial_reason}")
    if repeat := repeat_line(report):
        lines.append(f"- {repeat}")
    for warning in judge.warnings:
        lines.append(f"- ⚠️ {warning}")
    if unmeasured := not_measured(report):
        lines.append(
            "- ❌ gates not measured (left out by --metrics), so the run cannot pass: "
            + ", ".join(unmeasured)
        )
    lines += [
        "",
        "| metric | n | errors | mean | std | 95% CI | threshold | verdict |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(report)]
    rc = report.refusal_confusion
    lines += [
        "",
        "Refusals (expected × actual): "
        f"refused when expected {rc.true_refusal}, answered when expected {rc.true_answer}, "
        f"missed refusals {rc.missed_refusal}, false refusals {rc.false_refusal}.",
        *([] if not report.outcomes else ["", outcomes_line(report)]),
        "",
        f"## Bad cases ({len(report.bad_cases)})",
        "",
    ]
    lines += [
        f"- `{b.id}`: {'; '.join(r.message for r in b.reasons)}" for b in report.bad_cases
    ] or ["none"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- HTML (app.view draws the page)


class Bar(TypedDict):
    height: int
    title: str


def bars(histogram: Histogram | None, max_height: int = 24) -> list[Bar]:
    """One bar per histogram bin, height ∝ count (an empty bin is a 1 px stub), titled
    ``[lo, hi): n`` — the distribution next to the mean (seed 004: not the mean alone)."""
    if histogram is None:
        return []
    edges, counts = histogram.edges, histogram.counts
    top = max(counts, default=0)
    if not top or len(edges) != len(counts) + 1:
        return []
    return [
        Bar(
            height=max(1, round(max_height * n / top)),
            title=f"[{edges[i]:g}, {edges[i + 1]:g}): {n}",
        )
        for i, n in enumerate(counts)
    ]
