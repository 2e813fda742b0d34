"""Compare two evaluation reports: the metric delta table of seed 004 §4.2.

``compare_reports(base, new)`` pairs the cases of two typed reports
(:class:`~app.eval.report.records.Report`, docs/interfaces.md §6) by id, and for every metric
computes the paired Δ, its 95 % CI, its significance (Holm-adjusted across the table's
metrics) and a verdict against the metric's margin of practical relevance
(``thresholds.toml [margins]``):

* ✅ ``better`` — a significant change in the good direction, the CI not inside ±margin;
* ✅ ``no_change`` — no meaningful change: the CI lies strictly inside ±margin;
* ⚠️ ``inconclusive`` — the CI crosses the margin and nothing is significant: the row says
  the smallest effect this suite detects and how many cases would resolve the margin;
* ⚠️ ``judge_drift`` — a judge score moved only on cases whose answer is identical in both
  runs: the ruler moved, not the answers;
* ⚠️ ``review`` — a change a human must look at: the spread grew (Brown–Forsythe, seed 004
  §12.3 "均值不变但方差扩大也是质量退化"), a refusal rate went up, a metric without a good
  direction moved, a cost got worse, or the metric is missing from one report;
* ❌ ``regression`` — a significant change in the bad direction; ❌ ``red_line`` — a
  red-line metric (e.g. ACL leak) got worse on any case or is above its limit;
* ➖ ``not_measured`` — no model produced what the row reads: an offline candidate (every row
  read off the answer) or an offline judge (judge scores); the table is "unverified: no
  model ran" and names the command that would measure it.

The tag × metric breakdown is Benjamini–Hochberg-adjusted across all its pairs.

Two reports measured with different rulers (judge model, judge prompt version/hash,
dataset version/hash) are refused with :class:`~app.errors.ReportError` unless
``allow_ruler_change=True``; then the title says so. Two reports measured against a
different ground truth (knowledge-base content, a prompt's content under one version name,
the retriever as resolved: :func:`app.eval.report.truth.truth_differences`) are refused
unless ``allow_truth_change=True``; then the table lists the differences. Reports produced by an offline
candidate or judge are labelled as offline-baseline numbers in the title.

The package: :mod:`.rows` (pairing, statistics and the verdict rules; the tests themselves
are :mod:`app.eval.stats.significance`), :mod:`.rulers` (what makes two reports incomparable, and
their labels), :mod:`.table` (the result records) and :mod:`.render` (markdown);
:func:`comparison_markdown` and :meth:`Comparison.to_dict` are the two output formats
(``rag eval compare --format``); the records know nothing of their rendering.

The comparison reads a report's summary (:class:`~app.eval.report.records.ReportSummary`) and, of
each case, its id, tags, refused flag, answer and metric values (:class:`.rows.CaseView`):
:func:`compare_reports` takes two loaded :class:`~app.eval.report.records.Report`,
:func:`compare_views` a summary and case views each, and :func:`compare_files` reads the files
with the lean reader (:func:`app.eval.report.stream.load_lean`: one line at a time, no trace,
no typed metric detail) — the same comparison as of the full typed reports (tested).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from app.errors import ReportError
from app.eval.compare.answers import answer_delta
from app.eval.compare.columns import CaseColumns
from app.eval.compare.render import comparison_markdown
from app.eval.compare.rows import (
    COST_GROUPS,
    REFUSAL_RATE,
    REFUSAL_RATE_SPEC,
    REVIEW_WHEN_UP,
    CaseView,
    MetricPairs,
    RowContext,
    Tested,
    adjust_tags,
    kept_pairs,
    metric_cis,
    metric_row,
    metric_test,
    missing_row,
    tag_positions_of,
    tag_tests,
)
from app.eval.compare.rulers import judge_desc, prompt_labels, ruler_differences
from app.eval.compare.table import (
    LABEL,
    SYMBOL,
    UNVERIFIED,
    Comparison,
    MetricDelta,
    TagRegression,
    Verdict,
)
from app.eval.report.outcome import FAILURES
from app.eval.report.records import MetricInfo, Report, ReportSummary
from app.eval.report.truth import truth_differences, truth_unknowns
from app.eval.stats import significance

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "COST_GROUPS",
    "LABEL",
    "REFUSAL_RATE",
    "REFUSAL_RATE_SPEC",
    "REVIEW_WHEN_UP",
    "SYMBOL",
    "UNVERIFIED",
    "Comparison",
    "MetricDelta",
    "TagRegression",
    "Verdict",
    "compare_files",
    "compare_reports",
    "compare_views",
    "comparison_markdown",
    "ruler_differences",
]


def compare_reports(
    base: Report,
    new: Report,
    *,
    base_name: str = "base",
    new_name: str = "new",
    allow_ruler_change: bool = False,
    allow_truth_change: bool = False,
    alpha: float = significance.ALPHA,
    margins: Mapping[str, float] | None = None,
) -> Comparison:
    """Compare two loaded reports (see the module docstring for the rules)."""
    return compare_views(
        base,
        base.cases,
        new,
        new.cases,
        base_name=base_name,
        new_name=new_name,
        allow_ruler_change=allow_ruler_change,
        allow_truth_change=allow_truth_change,
        alpha=alpha,
        margins=margins,
    )


def compare_views(
    base: ReportSummary,
    base_list: Sequence[CaseView] | CaseColumns,
    new: ReportSummary,
    new_list: Sequence[CaseView] | CaseColumns,
    *,
    base_name: str = "base",
    new_name: str = "new",
    allow_ruler_change: bool = False,
    allow_truth_change: bool = False,
    alpha: float = significance.ALPHA,
    margins: Mapping[str, float] | None = None,
) -> Comparison:
    """Compare two reports given as summary + case views (ids unique within each), or
    their :class:`~app.eval.compare.columns.CaseColumns`.
    ``margins``: each metric's margin of practical relevance (default: thresholds.toml)."""
    if margins is None:
        from app.eval.scoring.thresholds import load_margins

        margins = load_margins()
    diffs = ruler_differences(base, new)
    if diffs and not allow_ruler_change:
        raise ReportError(
            f"refusing to compare {base_name} and {new_name}: they were measured with "
            f"different rulers — base judged by {judge_desc(base)}, new judged by "
            f"{judge_desc(new)}. Differences: " + "; ".join(diffs) + ". Re-run both with the "
            "same judge and dataset, or pass --allow-ruler-change to compare anyway."
        )
    truth = truth_differences(base.meta, new.meta)
    if truth and not allow_truth_change:
        raise ReportError(
            f"refusing to compare {base_name} and {new_name}: they were measured against a "
            "different ground truth:\n" + "\n".join(f"  - {d}" for d in truth) + "\nRe-run "
            "both on the same knowledge base, prompt content and retriever, or pass "
            "--allow-truth-change to compare anyway (the table lists the differences)."
        )
    waived = [
        f"{name} was merged from shards whose ground truth differed (--allow-truth-change): {d}"
        for report, name in ((base, "base"), (new, "new"))
        for d in report.meta.truth_waived
    ]
    return _compare_columns(
        base,
        _columns(base, base_list),
        new,
        _columns(new, new_list),
        base_name=base_name,
        new_name=new_name,
        diffs=diffs,
        truth=truth,
        waived=waived,
        alpha=alpha,
        margins=margins,
    )


def _columns(summary: ReportSummary, cases: Sequence[CaseView] | CaseColumns) -> CaseColumns:
    if isinstance(cases, CaseColumns):
        return cases
    return CaseColumns.of(list(summary.metrics), cases)


def _compare_columns(
    base: ReportSummary,
    bc: CaseColumns,
    new: ReportSummary,
    nc: CaseColumns,
    *,
    base_name: str,
    new_name: str,
    diffs: list[str],
    truth: list[str],
    waived: list[str],
    alpha: float,
    margins: Mapping[str, float],
) -> Comparison:
    """:func:`compare_views` once the rulers are checked, over the two reports' columns
    (:class:`~app.eval.compare.columns.CaseColumns`: no case object held)."""
    in_new = nc.index
    bpos_all = np.array([i for i, cid in enumerate(bc.ids) if cid in in_new], dtype=np.intp)
    all_paired = [bc.ids[i] for i in bpos_all.tolist()]
    npos_all = np.array([in_new[cid] for cid in all_paired], dtype=np.intp)
    unpaired_base = tuple(cid for cid in bc.ids if cid not in in_new)
    unpaired_new = tuple(cid for cid in nc.ids if cid not in bc.index)
    if not all_paired:
        raise ReportError(
            f"{base_name} and {new_name} share no case id; were they run on the same suite?"
        )
    # --repeat: a case unstable in either report (its outcome flipped, a score spread beyond
    # its margin) is left out of every verdict; the table says how many
    shaky = bc.unstable[bpos_all] | nc.unstable[npos_all]
    unstable = tuple(all_paired[i] for i in np.flatnonzero(shaky).tolist())
    steady = np.flatnonzero(~shaky)
    paired_ids = [all_paired[i] for i in steady.tolist()]
    bpos, npos = bpos_all[steady], npos_all[steady]
    if not paired_ids:
        raise ReportError(
            f"every one of the {len(all_paired)} paired case(s) is unstable across its --repeat "
            "samples (the outcome flipped or a score spread beyond its margin): no verdict "
            "would mean anything. Lower the candidate's --temperature, or look at the cases' "
            "samples in the reports"
        )

    # every metric's pairs first: the bootstrap CIs are drawn together (one index draw per
    # number of pairs, as each metric's own draw would be: the same CIs)
    # (metric, spec, pairs or None when only one report has it, derived from refused flags)
    planned: list[tuple[str, MetricInfo, MetricPairs | None, bool]] = []
    names = [*base.metrics, *(m for m in new.metrics if m not in base.metrics)]
    common = [m for m in names if m in base.metrics and m in new.metrics]
    _check_nan(bc, bpos, common, base_name)
    _check_nan(nc, npos, common, new_name)
    columns = {
        m: kept_pairs(paired_ids, bc.values[bpos, bc.col[m]], nc.values[npos, nc.col[m]])
        for m in common
    }
    for metric in names:
        spec = base.metrics.get(metric) or new.metrics[metric]
        planned.append((metric, spec, columns.get(metric), False))
        if spec.scale == "binary" and (column := columns.get(metric)) is not None:
            _check_binary(metric, column, base_name, new_name)
    if REFUSAL_RATE not in base.metrics and REFUSAL_RATE not in new.metrics:
        refusals = kept_pairs(paired_ids, bc.refused[bpos], nc.refused[npos])
        if len(refusals):
            planned.append((REFUSAL_RATE, REFUSAL_RATE_SPEC, refusals, True))
    cis = metric_cis([(m, spec, mp) for m, spec, mp, _ in planned if mp is not None])
    # identical answers (both known, not empty): a judge score that moved there is the
    # ruler moving
    same_answer = bc.answered[bpos] & (bc.digests[bpos] == nc.digests[npos])
    unmeasured = offline_reasons(base, new)
    weak = weak_judge_reason(base, new)
    tested: dict[str, Tested | None] = {
        m: metric_test(spec, mp) if mp is not None else None for m, spec, mp, _ in planned
    }
    # Holm across the rows a verdict reads a p-value from (not the unmeasured ones)
    family = [
        m
        for m, spec, _, _ in planned
        if tested[m] is not None and unmeasured.get(_sensitivity(m, spec)) is None
    ]
    holm = dict(zip(family, significance.holm([tested[m].p for m in family]), strict=True))  # type: ignore[union-attr]
    rows: list[MetricDelta] = []
    tag_family: list[TagRegression] = []
    by_tag = tag_positions_of(bc.tag_codes[bpos], bc.tag_lists)
    for metric, spec, metric_pairs, derived in planned:
        if metric_pairs is None:
            rows.append(missing_row(metric, spec, "new" if metric not in base.metrics else "base"))
            continue
        why = unmeasured.get(_sensitivity(metric, spec))
        ctx = RowContext(
            margin=margins.get(metric, 0.0),
            p_adjusted=holm.get(metric),
            same_answer=same_answer,
            not_measured=why,
            weak_judge=weak if spec.kind == "judge" else None,
        )
        rows.append(metric_row(metric, spec, metric_pairs, alpha, cis, tested[metric], ctx))
        if not derived and why is None:  # the derived refusal rate has no tag breakdown
            tag_family.extend(tag_tests(metric, spec, metric_pairs, by_tag))
    tags = adjust_tags(tag_family, alpha)
    judges = [m for m, spec in base.metrics.items() if spec.kind == "judge" and m in new.metrics]
    moved = np.zeros(len(paired_ids), dtype=bool)
    for m in judges:  # NaN (undefined in either) is never "moved"
        moved |= np.abs(bc.values[bpos, bc.col[m]] - nc.values[npos, nc.col[m]]) > 1e-12
    judge_only = tuple(paired_ids[i] for i in np.flatnonzero(same_answer & moved).tolist())
    notes = [
        f"{name} is a partial run: only its finished cases are compared."
        for report, name in ((base, base_name), (new, new_name))
        if report.partial
    ]
    notes += truth_unknowns(base.meta, new.meta)

    offline = base.offline or new.offline
    base_label, new_label = prompt_labels(base, new, base_name, new_name)
    title = f"Delta table: {base_label} → {new_label}"
    if offline:
        title = "Offline-baseline numbers — " + title
    if diffs:
        title += " — ruler changed, compared with --allow-ruler-change"
    if truth:
        title += " — ground truth differs, compared with --allow-truth-change"
    tags.sort(key=lambda t: (not t.significant, t.q_value if t.q_value is not None else 1.0))
    unverified = "; ".join(sorted(set(unmeasured.values()))) or None
    return Comparison(
        base_label=base_label,
        new_label=new_label,
        title=title,
        offline=offline,
        ruler_changed=bool(diffs),
        ruler_differences=tuple(diffs),
        truth_differences=tuple([*truth, *waived]),
        paired=len(all_paired),
        unpaired_base=unpaired_base,
        unpaired_new=unpaired_new,
        rows=tuple(rows),
        tag_regressions=tuple(tags),
        notes=tuple(notes),
        answers=answer_delta(
            base.meta.model_dump(mode="json"),
            new.meta.model_dump(mode="json"),
            len(all_paired),
            tuple(
                all_paired[i]
                for i in np.flatnonzero(bc.digests[bpos_all] != nc.digests[npos_all]).tolist()
            ),
            base_name,
            new_name,
        ),
        new_failures=_new_failures(bc, nc, bpos, npos, paired_ids),
        alpha=alpha,
        unverified=unverified,
        measure_with=measure_command(base, new) if unverified else None,
        judge_only=judge_only,
        tag_tests=len(tag_family),
        unstable=unstable,
        samples=(base.meta.config.repeat, new.meta.config.repeat),
        repeat_notes=tuple(repeat_notes(base, new, base_name, new_name)),
        sampled=any(r.meta.config.repeat > 1 and not r.meta.candidate.offline for r in (base, new)),
    )


#: the metrics an offline candidate cannot measure for a prompt change: every one read off the
#: answer (its retrieval rows, red lines and token counts are real offline)
def _sensitivity(metric: str, spec: MetricInfo) -> str | None:
    """``"judge"`` (a judge score), ``"answer"`` (read off the answer) or ``None`` (retrieval,
    a red line, token counts: the same whoever answers)."""
    # a token count is counted by the harness, whoever answers (the table's unit says which)
    if spec.red_line or spec.group == "retrieval" or spec.unit == "tokens":
        return None
    return "judge" if spec.kind == "judge" else "answer"


def offline_reasons(
    base: ReportSummary,
    new: ReportSummary,
    paired_ids: Sequence[str] = (),
    base_cases: Mapping[str, CaseView] | None = None,
) -> dict[str | None, str]:
    """Why rows are not measured: ``{"answer": …, "judge": …}`` for an offline candidate
    (every answer-read row, judge scores too) and an offline judge (judge scores)."""
    out: dict[str | None, str] = {}
    cands = sorted({r.meta.candidate.provider for r in (base, new) if r.meta.candidate.offline})
    judges = sorted({str(r.meta.judge.provider) for r in (base, new) if r.meta.judge.offline})
    if cands:
        why = f"no model ran: the candidate {', '.join(cands)} is an offline baseline"
        out["answer"] = why
        out["judge"] = why
    elif judges:
        out["judge"] = f"no model judged: the judge {', '.join(judges)} is an offline heuristic"
    return out


def weak_judge_reason(base: ReportSummary, new: ReportSummary) -> str | None:
    """Why the judge rows are never ✅ (nor ❌): a report was judged by a weak judge
    (``meta.judge.weak``: the local model tier, or one allowed by --allow-weak-judge)."""
    weak = sorted({str(r.meta.judge.provider) for r in (base, new) if r.meta.judge.weak})
    if not weak:
        return None
    return (
        f"judged by {', '.join(weak)}, a weak judge (the local tier or --allow-weak-judge): "
        "its scores are reported, never a verdict — re-judge both runs with a judge stronger "
        "than the candidate"
    )


def repeat_notes(
    base: ReportSummary, new: ReportSummary, base_name: str = "base", new_name: str = "new"
) -> list[str]:
    """What ``--repeat`` did in each report: an offline candidate is deterministic, asked once."""
    said: dict[tuple[int, str], list[str]] = {}  # (K, baseline) -> the reports that say so
    for report, name in ((base, base_name), (new, new_name)):
        k = report.meta.config.repeat
        if k > 1 and report.meta.candidate.offline:
            said.setdefault((k, report.meta.candidate.provider), []).append(name)
    return [
        f"{' and '.join(names)}: --repeat {k} with the offline baseline {provider}, which is "
        f"deterministic: its {k} samples would be identical, so each case was asked once (no "
        "flip rate or spread measured)."
        for (k, provider), names in said.items()
    ]


def measure_command(base: ReportSummary, new: ReportSummary) -> str:
    """The command that would measure the rows an offline candidate/judge left unmeasured:
    ``rag eval diff-prompt`` of the prompt versions that differ, else the two runs again."""
    suite = new.meta.suite
    models = "--model anthropic:claude-sonnet-4-6 --judge anthropic:claude-opus-4-7"
    bp, np_ = base.meta.prompts, new.meta.prompts
    for pid in sorted(set(bp) & set(np_)):
        if (bp[pid].version, bp[pid].hash) != (np_[pid].version, np_[pid].hash):
            b = bp[pid].version.rpartition("_v")[2]
            n = np_[pid].version.rpartition("_v")[2]
            if b.isdigit() and n.isdigit() and b != n:
                return f"rag eval diff-prompt {pid} v{b} v{n} --suite {suite} {models}"
    return f"rag eval run --suite {suite} {models} (for each side), then rag eval compare"


def compare_files(
    base: Path,
    new: Path,
    *,
    allow_ruler_change: bool = False,
    allow_truth_change: bool = False,
    alpha: float = significance.ALPHA,
    margins: Mapping[str, float] | None = None,
) -> Comparison:
    """:func:`compare_views` of two report files read with the lean reader
    (:func:`app.eval.report.stream.load_lean`); the same comparison as of the full reports."""
    from app.eval.compare.columns import read_both

    (bs, bc), (ns, nc) = read_both(base, new)
    return compare_views(
        bs,
        bc,
        ns,
        nc,
        base_name=str(base),
        new_name=str(new),
        allow_ruler_change=allow_ruler_change,
        allow_truth_change=allow_truth_change,
        alpha=alpha,
        margins=margins,
    )


def _check_nan(cols: CaseColumns, rows: NDArray[np.intp], names: Sequence[str], name: str) -> None:
    """A NaN value (not null: a report edited or built by hand) among the compared ones."""
    if not cols.nan_at:
        return
    read = set(rows.tolist())
    wanted = {cols.col[m] for m in names}
    for r, c in cols.nan_at:
        if r in read and c in wanted:
            raise ReportError(
                f"{name}: case {cols.ids[r]!r}: {cols.names[c]} is NaN; a metric value is "
                "NaN; an undefined value is null with a reason"
            )


def _new_failures(
    bc: CaseColumns,
    nc: CaseColumns,
    bpos: NDArray[np.intp],
    npos: NDArray[np.intp],
    paired: Sequence[str],
) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
    """The paired cases whose new outcome is a failure other than their base outcome
    (:mod:`app.eval.report.outcome`), by new outcome class; ``None`` when either report was
    written before outcome classes."""
    b, n = bc.outcomes[bpos], nc.outcomes[npos]
    if (b < 0).any() or (n < 0).any():
        return None
    by_class: dict[str, list[str]] = {}
    bnames, nnames = bc.outcome_names, nc.outcome_names
    for i, (bo, no) in enumerate(zip(b.tolist(), n.tolist(), strict=True)):
        outcome = nnames[no]
        if outcome in FAILURES and outcome != bnames[bo]:
            by_class.setdefault(outcome, []).append(paired[i])
    return tuple((o, tuple(by_class[o])) for o in FAILURES if o in by_class)


def _check_binary(metric: str, column: MetricPairs, base_name: str, new_name: str) -> None:
    """A rate metric's values are 0 or 1 (McNemar counts flips): another value is a report
    that was edited or written by something else — refused, naming the case and the file."""
    import numpy as np

    for name, values in ((base_name, column.base), (new_name, column.new)):
        bad = np.flatnonzero((values != 0) & (values != 1))
        if len(bad):
            i = int(bad[0])
            raise ReportError(
                f"{name}: case {column.ids[i]!r} has {metric} = {float(values[i]):g}, but "
                f"{metric} is a rate (0 or 1 per case; {len(bad)} such value(s)) — the report "
                "was edited or written by another tool: regenerate it with rag eval run"
            )
