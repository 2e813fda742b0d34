"""``rag eval merge``: shard reports (``rag eval run --shard i/N``) into one report.

The merged report is built by the same :func:`~app.eval.report.io.build_report` a single
process uses, from the union of the shards' case results — so its distributions, bootstrap
intervals, breakdowns, verdicts and bad cases are those of one run over all cases. It is
refused, naming the reason, when the shards do not make one run:

* a shard missing, present twice (two different runs of one index), or partial
  (resume it first: ``rag eval run --resume RUN_ID``);
* overlapping case ids, or cases missing from the plan;
* mixed rulers (judge, judge samples, judge prompts, thresholds), prompt versions,
  datasets (name, version, content hash), models, code (git sha) or settings that decide
  results (limit, k, seed, metrics, prompt overrides);
* a different ground truth (:func:`~app.eval.report.truth.truth_differences`): knowledge-base
  content, chunker or analyser, a prompt's content under one version name, the retriever as
  resolved — every difference named; ``allow_truth_change`` merges anyway and records them
  in the merged report's ``meta.truth_waived``.

The merged report's status is computed under ``gate`` (``rag eval merge --gate``), else under
the gate the shards were run with (shards run with different gates are refused without one).

Idempotent: the merged run id and time derive from the shards', so merging the same shards
again gives the same report (and the same file name). Engine counters are summed over the
shards; the duration is the longest shard's (they run side by side).
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from app.errors import ReportError
from app.eval.config import Gate, operational_fields
from app.eval.report.records import CaseResult, Report, ReportSummary, RunMeta, Totals
from app.eval.report.summary import DigestTable, digest, summary_parts
from app.eval.report.truth import truth_differences
from app.llm.engine import EngineStats

if TYPE_CHECKING:
    from app.eval.scoring.thresholds import ThresholdSet

R = TypeVar("R", bound=ReportSummary)


def _deciding_config(report: ReportSummary) -> dict[str, object]:
    """The settings that decide results (the fields :class:`~app.eval.config.RunConfig`
    marks ``Decides``); shards may differ in the operational ones (speed, cache, shard)."""
    operational = operational_fields()
    return {k: v for k, v in report.meta.config.to_json().items() if k not in operational}


def _same(label: str, reports: Sequence[ReportSummary], value: object, *, what: str) -> None:
    first = reports[0]
    for r in reports[1:]:
        if getattr_path(r, label) != value:
            raise ReportError(
                f"shards {first.run_id} and {r.run_id} differ in {what}: "
                f"{value!r} vs {getattr_path(r, label)!r} — merge only shards of one run"
            )


def getattr_path(report: ReportSummary, label: str) -> object:
    node: object = report
    for part in label.split("."):
        node = getattr(node, part)
    if isinstance(node, list):
        return [x.model_dump() if hasattr(x, "model_dump") else x for x in node]
    return node.model_dump() if hasattr(node, "model_dump") else node


def check_shards(
    reports: Sequence[Report], *, allow_truth_change: bool = False
) -> tuple[int, int, list[str]]:
    """Refuse shards that do not form one run; return (shard count, planned cases, the
    ground-truth differences accepted with ``allow_truth_change``)."""
    count, planned, truth = check_summaries(reports, allow_truth_change=allow_truth_change)
    ids: dict[str, str] = {}
    for r in reports:
        for c in r.cases:
            _claim(ids, c.id, r.run_id)
    _all_planned(ids, planned)
    return count, planned, truth


def _claim(ids: dict[str, str], case_id: str, run_id: str) -> None:
    if case_id in ids:
        raise ReportError(
            f"case {case_id} is in shard runs {ids[case_id]} and {run_id}: shards overlap"
        )
    ids[case_id] = run_id


def _all_planned(ids: dict[str, str], planned: int) -> None:
    if len(ids) != planned:
        raise ReportError(
            f"the shards hold {len(ids)} cases, the plan has {planned}: cases are missing"
        )


def check_summaries(
    reports: Sequence[ReportSummary], *, allow_truth_change: bool = False
) -> tuple[int, int, list[str]]:
    """:func:`check_shards` without the cases: what the shards' summaries must agree on."""
    if not reports:
        raise ReportError("give the shard reports to merge (rag eval merge REPORT…)")
    for r in reports:
        if r.meta.shard is None:
            raise ReportError(
                f"report {r.run_id} is not a shard (no meta.shard): merge joins the reports of "
                "`rag eval run --shard i/N`"
            )
        if r.partial:
            raise ReportError(
                f"shard {r.meta.shard.index}/{r.meta.shard.count} (run {r.run_id}) is partial "
                f"({r.partial_reason}): finish it with `rag eval run --resume {r.run_id}`, "
                "then merge"
            )
    shard0 = reports[0].meta.shard
    assert shard0 is not None
    count, planned = shard0.count, shard0.planned
    by_index: dict[int, str] = {}
    for r in reports:
        s = r.meta.shard
        assert s is not None
        if s.count != count or s.planned != planned:
            raise ReportError(
                f"run {r.run_id} is shard {s.index}/{s.count} of {s.planned} cases, "
                f"run {reports[0].run_id} is of {count} shards and {planned} cases: "
                "merge only shards of one plan"
            )
        if s.index in by_index:
            raise ReportError(
                f"shard {s.index}/{count} is given twice (runs {by_index[s.index]} and "
                f"{r.run_id}): pass one report per shard"
            )
        by_index[s.index] = r.run_id
    missing = sorted(set(range(1, count + 1)) - set(by_index))
    if missing:
        raise ReportError(
            f"missing shard(s) {', '.join(f'{i}/{count}' for i in missing)}: run them "
            "(`rag eval run … --shard i/N`) and pass every shard's report"
        )
    _same("meta.suite", reports, reports[0].meta.suite, what="suite")
    _same("meta.datasets", reports, getattr_path(reports[0], "meta.datasets"), what="dataset")
    _same("meta.candidate", reports, getattr_path(reports[0], "meta.candidate"), what="model")
    _same("meta.judge", reports, getattr_path(reports[0], "meta.judge"), what="judge (the ruler)")
    _same(
        "meta.thresholds", reports, getattr_path(reports[0], "meta.thresholds"), what="thresholds"
    )
    _same("meta.git.sha", reports, reports[0].meta.git.sha, what="code (git sha)")
    deciding = _deciding_config(reports[0])
    for r in reports[1:]:
        other = _deciding_config(r)
        if other != deciding:
            keys = sorted(
                k for k in deciding.keys() | other.keys() if deciding.get(k) != other.get(k)
            )
            raise ReportError(
                f"shards {reports[0].run_id} and {r.run_id} differ in settings that decide "
                f"results: {', '.join(keys)} — merge only shards of one run"
            )
    versions: dict[str, tuple[str, str]] = {}
    for r in reports:
        for pid, ref in r.meta.prompts.items():
            seen = versions.setdefault(pid, (ref.version, r.run_id))
            if seen[0] != ref.version:
                raise ReportError(
                    f"prompt {pid}: shard {seen[1]} used {seen[0]}, shard {r.run_id} used "
                    f"{ref.version} — merge only shards of one run"
                )
    truth = [
        d
        for r in reports[1:]
        for d in truth_differences(
            reports[0].meta,
            r.meta,
            (f"shard {reports[0].run_id}", f"shard {r.run_id}"),
            strict=True,
        )
    ]
    if truth and not allow_truth_change:
        raise ReportError(
            "the shards did not run against the same ground truth:\n"
            + "\n".join(f"  - {d}" for d in truth)
            + "\nre-run the odd shard(s) on the same knowledge base, prompts and retriever, or "
            "pass --allow-truth-change to merge anyway (the merged report lists the "
            "differences)"
        )
    return count, planned, truth


def _add(a: object, b: object) -> object:
    """Sum two counters of one kind: numbers add, dicts merge key by key (nested), anything
    else (a flag, a setting) keeps the first shard's value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a + b
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = _add(out[k], v) if k in out else v
        return out
    return a


def _sum_stats(stats: Sequence[EngineStats | None]) -> EngineStats | None:
    """The shards' engine counters summed (retry budgets and concurrency adaptations per
    endpoint are merged key by key)."""
    present = [s for s in stats if s is not None]
    if not present:
        return None
    total = EngineStats(**asdict(present[0]))
    for s in present[1:]:
        for f in fields(EngineStats):
            setattr(total, f.name, _add(getattr(total, f.name), getattr(s, f.name)))
    total.cost_usd = round(total.cost_usd, 10)
    return total


def merged_gate(reports: Sequence[ReportSummary], gate: Gate | None) -> Gate:
    """``gate`` when given, else the one gate the shards were run with."""
    if gate is not None:
        return gate
    gates = sorted({r.meta.config.gate for r in reports})
    if len(gates) != 1:
        raise ReportError(
            "the shards were run with different gates (" + ", ".join(gates) + "): choose the "
            "merged run's with --gate thresholds or --gate red-lines"
        )
    return gates[0]


def _merged_head(
    unique: Sequence[ReportSummary], planned: int, waived: list[str], gate: Gate | None
) -> tuple[RunMeta, Totals, ThresholdSet, str, str]:
    """The merged run's meta, totals, thresholds, run id and time (from the summaries)."""
    from app.eval.scoring.thresholds import load_thresholds
    from app.paths import repo_root

    first = unique[0]
    ref = first.meta.thresholds
    path = Path(ref.path)
    thresholds = load_thresholds(ref.suite, path if path.is_absolute() else repo_root() / path)
    if thresholds.sha256 != ref.sha256:
        raise ReportError(
            f"the thresholds file {ref.path} changed since the shards ran (sha256 "
            f"{ref.sha256[:12]}… then, {thresholds.sha256[:12]}… now): merge with the code "
            "the shards ran"
        )
    prompts = {pid: p for r in unique for pid, p in r.meta.prompts.items()}
    meta = RunMeta.model_validate(
        {
            **first.meta.model_dump(),
            "prompts": {k: v.model_dump() for k, v in sorted(prompts.items())},
            "config": first.meta.config.replace(
                shard=None, gate=merged_gate(unique, gate)
            ).model_dump(),
            "shard": None,
            "merged_from": [r.run_id for r in unique],
            "resumed_from": None,
            "truth_waived": sorted({*first.meta.truth_waived, *waived}),
        }
    )
    t = [r.totals for r in unique]
    stats = _sum_stats([x.engine for x in t])
    totals = Totals(
        cases_planned=planned,
        cases_done=sum(x.cases_done for x in t),
        cases_with_errors=sum(x.cases_with_errors for x in t),
        cases_unstable=(
            sum(x.cases_unstable or 0 for x in t)
            if any(x.cases_unstable is not None for x in t)
            else None
        ),
        judge_errors=sum(x.judge_errors for x in t),
        cost_usd=round(sum(x.cost_usd for x in t), 8),
        candidate_cost_usd=round(sum(x.candidate_cost_usd for x in t), 8),
        judge_cost_usd=round(sum(x.judge_cost_usd for x in t), 8),
        duration_s=max(x.duration_s for x in t),
        engine=stats,
    )
    created_at = max(r.created_at for r in unique)
    digest = hashlib.sha256("|".join(r.run_id for r in unique).encode()).hexdigest()[:6]
    run_id = created_at.replace("-", "").replace(":", "")[:16] + "-" + digest
    return meta, totals, thresholds, run_id, created_at


def _shards(reports: Sequence[R]) -> list[R]:
    unique = list({r.run_id: r for r in reports}.values())  # the same file twice is one shard
    unique.sort(key=lambda r: r.meta.shard.index if r.meta.shard else 0)
    return unique


def merge_reports(
    reports: Sequence[Report], *, allow_truth_change: bool = False, gate: Gate | None = None
) -> Report:
    """One report over every shard's cases (see the module docstring)."""
    from app.eval.report.io import build_report
    from app.eval.scoring.table import specs

    unique = _shards(reports)
    _, planned, waived = check_shards(unique, allow_truth_change=allow_truth_change)
    meta, totals, thresholds, run_id, created_at = _merged_head(unique, planned, waived, gate)
    return build_report(
        run_id=run_id,
        created_at=created_at,
        meta=meta,
        metric_specs=specs(),
        cases=[c for r in unique for c in r.cases],
        thresholds=thresholds,
        totals=totals,
        partial_reason=None,
        sent_texts={h: t for r in unique for h, t in r.sent_texts.items()},
    )


def merge_files(
    paths: Sequence[Path], *, allow_truth_change: bool = False, gate: Gate | None = None
) -> tuple[ReportSummary, Callable[[], Iterator[str]]] | Report:
    """:func:`merge_reports` of report files, streamed: the merged summary and its case rows
    (sorted by id, read again from the shard files on each call) — one case in memory at a
    time and the digests of all (:class:`~app.eval.report.summary.DigestTable`). Shards
    that are not in the line layout a run writes, or that keep their sent texts apart
    (``sent_texts``), are loaded and merged whole: the :class:`Report` is returned."""
    from app.eval.report.io import build_summary, load_report
    from app.eval.report.stream import NotLineLayout, line_report
    from app.eval.scoring.table import specs

    heads: list[ReportSummary] = []
    where: dict[str, Path] = {}
    try:
        for p in paths:
            summary, lines = line_report(p)
            lines.close()  # type: ignore[attr-defined]
            heads.append(summary)
            where.setdefault(summary.run_id, p)
    except NotLineLayout:
        heads = []
    if not heads or any(h.sent_texts for h in heads):
        return merge_reports(
            [load_report(p) for p in paths], allow_truth_change=allow_truth_change, gate=gate
        )
    unique = _shards(heads)
    _, planned, waived = check_summaries(unique, allow_truth_change=allow_truth_change)
    meta, totals, thresholds, run_id, created_at = _merged_head(unique, planned, waived, gate)
    bar = thresholds.bad_judge_score
    judges = sorted(n for n, spec in specs().items() if spec.kind == "judge")
    table = DigestTable()
    ids: dict[str, str] = {}
    for head in unique:
        for case, _ in _cases(where[head.run_id], bar):
            _claim(ids, case.id, head.run_id)
            table[case.id] = digest(case, judges, bar)
    _all_planned(ids, planned)
    del ids
    summary = build_summary(
        run_id=run_id,
        created_at=created_at,
        meta=meta,
        metric_specs=specs(),
        parts=summary_parts(table, specs(), meta.seed),
        thresholds=thresholds,
        totals=totals,
        partial_reason=None,
    )
    files = [where[h.run_id] for h in unique]

    def rows() -> Iterator[str]:
        for _, row in heapq.merge(*(_rows(p, bar) for p in files)):
            yield row

    return summary, rows


def _rows(path: Path, bad_judge_score: float) -> Iterator[tuple[str, str]]:
    """(id, JSON row) of each case of a line-layout report :func:`_cases` has read and
    validated: the line as written when it has its outcome, else as :func:`_cases` gives it."""
    from app.eval.report.stream import line_report

    _, lines = line_report(path)
    for _, raw in lines:
        data = json.loads(raw)
        if data.get("outcome") is not None:
            yield data["id"], raw.decode("utf-8")
        else:
            case = CaseResult.model_validate(data)
            yield case.id, _with_outcome_row(case, bad_judge_score)


def _with_outcome_row(case: CaseResult, bad_judge_score: float) -> str:
    from app.eval.report.outcome import with_outcome
    from app.wellformed import model_json

    return model_json(with_outcome(case, bad_judge_score))


def _cases(path: Path, bad_judge_score: float) -> Iterator[tuple[CaseResult, str]]:
    """Each case of a line-layout report with its outcome, validated, and its JSON row (the
    line as written when it has its outcome already; else the case with it, written again)."""
    from app.eval.report.outcome import with_outcome
    from app.eval.report.stream import line_report, typed_case
    from app.wellformed import model_json

    _, lines = line_report(path)
    last = ""
    for line_no, raw in lines:
        case = typed_case(raw, path, line_no)
        if case.id <= last:
            raise ReportError(
                f"{path}:{line_no}: case {case.id} is not after {last}: a report's cases are "
                "sorted by id (was it edited?); re-run the shard"
            )
        last = case.id
        if case.outcome is not None:
            yield case, raw.decode("utf-8")
        else:
            with_it = with_outcome(case, bad_judge_score)
            yield with_it, model_json(with_it)


__all__ = ["check_shards", "check_summaries", "merge_files", "merge_reports", "merged_gate"]
