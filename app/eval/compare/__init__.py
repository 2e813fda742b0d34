"""Compare two evaluation reports: the metric delta table of seed 004 §4.2.

``compare_reports(base, new)`` pairs the cases of two typed reports
(:class:`~app.eval.records.Report`, docs/interfaces.md §6) by id, and for every metric
computes the paired Δ, its significance and a verdict:

* ✅ ``better`` — a significant change in the good direction;
* ✅ ``within noise`` — no significant change in the bad direction;
* ⚠️ ``review`` — a change a human must look at: the spread grew (Brown–Forsythe, seed 004
  §12.3 "均值不变但方差扩大也是质量退化"), a refusal rate went up, a metric without a good
  direction moved, or the metric is missing from one report;
* ❌ ``regression`` — a significant change in the bad direction; ❌ ``red line`` — a
  red-line metric (e.g. ACL leak) got worse on any case or is above its limit.

Two reports measured with different rulers (judge model, judge prompt version/hash,
dataset version/hash) are refused with :class:`~app.errors.ReportError` unless
``allow_ruler_change=True``; then the title says so. Reports produced by an offline
candidate or judge are labelled as offline-baseline numbers in the title.

The package: :mod:`.rows` (pairing, statistics and the verdict rules; the tests themselves
are :mod:`app.eval.stats_tests`), :mod:`.rulers` (what makes two reports incomparable, and
their labels), :mod:`.table` (the result records) and :mod:`.render` (markdown);
:meth:`Comparison.to_markdown` and :meth:`Comparison.to_dict` are the two output formats
(``rag eval compare --format``). Reports are read with :func:`app.eval.report.load_report`.
"""

from __future__ import annotations

from pathlib import Path

from app.errors import ReportError
from app.eval import stats_tests
from app.eval.answer_delta import answer_delta
from app.eval.compare.rows import (
    COST_GROUPS,
    REFUSAL_RATE,
    REFUSAL_RATE_SPEC,
    REVIEW_WHEN_UP,
    cases_by_id,
    metric_row,
    missing_row,
    pairs,
    refusal_pairs,
    tag_regressions,
)
from app.eval.compare.rulers import judge_desc, prompt_labels, ruler_differences
from app.eval.compare.table import LABEL, SYMBOL, Comparison, MetricDelta, TagRegression, Verdict
from app.eval.records import Report
from app.eval.report import load_report

__all__ = [
    "COST_GROUPS",
    "LABEL",
    "REFUSAL_RATE",
    "REFUSAL_RATE_SPEC",
    "REVIEW_WHEN_UP",
    "SYMBOL",
    "Comparison",
    "MetricDelta",
    "TagRegression",
    "Verdict",
    "compare_files",
    "compare_reports",
    "ruler_differences",
]


def compare_reports(
    base: Report,
    new: Report,
    *,
    base_name: str = "base",
    new_name: str = "new",
    allow_ruler_change: bool = False,
    alpha: float = stats_tests.ALPHA,
) -> Comparison:
    """Compare two loaded reports (see the module docstring for the rules)."""
    diffs = ruler_differences(base, new)
    if diffs and not allow_ruler_change:
        raise ReportError(
            f"refusing to compare {base_name} and {new_name}: they were measured with "
            f"different rulers — base judged by {judge_desc(base)}, new judged by "
            f"{judge_desc(new)}. Differences: " + "; ".join(diffs) + ". Re-run both with the "
            "same judge and dataset, or pass --allow-ruler-change to compare anyway."
        )
    base_cases, new_cases = cases_by_id(base), cases_by_id(new)
    paired_ids = [cid for cid in base_cases if cid in new_cases]
    unpaired_base = tuple(cid for cid in base_cases if cid not in new_cases)
    unpaired_new = tuple(cid for cid in new_cases if cid not in base_cases)
    if not paired_ids:
        raise ReportError(
            f"{base_name} and {new_name} share no case id; were they run on the same suite?"
        )

    rows: list[MetricDelta] = []
    tags: list[TagRegression] = []
    for metric in [*base.metrics, *(m for m in new.metrics if m not in base.metrics)]:
        spec = base.metrics.get(metric) or new.metrics[metric]
        if metric not in base.metrics or metric not in new.metrics:
            rows.append(missing_row(metric, spec, "new" if metric not in base.metrics else "base"))
            continue
        metric_pairs = pairs(base_cases, new_cases, paired_ids, metric)
        rows.append(metric_row(metric, spec, metric_pairs, alpha))
        tags.extend(tag_regressions(metric, spec, metric_pairs, base_cases, alpha))
    if REFUSAL_RATE not in base.metrics and REFUSAL_RATE not in new.metrics:
        refusals = refusal_pairs(base_cases, new_cases, paired_ids)
        if refusals:
            rows.append(metric_row(REFUSAL_RATE, REFUSAL_RATE_SPEC, refusals, alpha))
    notes = [
        f"{name} is a partial run: only its finished cases are compared."
        for report, name in ((base, base_name), (new, new_name))
        if report.partial
    ]

    offline = base.offline or new.offline
    base_label, new_label = prompt_labels(base, new, base_name, new_name)
    title = f"Delta table: {base_label} → {new_label}"
    if offline:
        title = "Offline-baseline numbers — " + title
    if diffs:
        title += " — ruler changed, compared with --allow-ruler-change"
    tags.sort(key=lambda t: (not t.significant, t.p_value if t.p_value is not None else 1.0))
    return Comparison(
        base_label=base_label,
        new_label=new_label,
        title=title,
        offline=offline,
        ruler_changed=bool(diffs),
        ruler_differences=tuple(diffs),
        paired=len(paired_ids),
        unpaired_base=unpaired_base,
        unpaired_new=unpaired_new,
        rows=tuple(rows),
        tag_regressions=tuple(tags),
        notes=tuple(notes),
        answers=answer_delta(
            _answers_view(base),
            _answers_view(new),
            paired_ids,
            base_name,
            new_name,
        ),
        alpha=alpha,
    )


def _answers_view(report: Report) -> dict[str, object]:
    """What :func:`answer_delta` reads of a report (its meta, each case's id and answer),
    without dumping every case's trace and metrics (seconds and ~1 GB at 10,000 cases)."""
    return {
        "meta": report.meta.model_dump(mode="json"),
        "cases": [{"id": c.id, "answer": c.answer} for c in report.cases],
    }


def compare_files(
    base: Path, new: Path, *, allow_ruler_change: bool = False, alpha: float = stats_tests.ALPHA
) -> Comparison:
    """:func:`compare_reports` of two report files (read with the one typed loader)."""
    return compare_reports(
        load_report(base, traces=False),
        load_report(new, traces=False),
        base_name=str(base),
        new_name=str(new),
        allow_ruler_change=allow_ruler_change,
        alpha=alpha,
    )
