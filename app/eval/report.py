"""Build, write and read evaluation reports (:class:`~app.eval.records.Report`).

* :func:`build_report` turns the case results into a :class:`Report` (summary,
  breakdowns, verdicts, the bad cases);
* :func:`bad_cases` is the one "bad case" policy: the report computes it, and the pytest
  front end, ``scripts/ci_eval.py`` and the HTML page read ``report.bad_cases``;
* :func:`write_report` writes ``report.model_dump_json()`` atomically (a temporary file in
  the same folder + ``os.replace``) after refusing any NaN/infinity, plus the markdown
  summary beside it (:mod:`app.eval.render`);
* :func:`load_report` is the one typed reader: every part of the project that opens a
  report file calls it. A schema version 1 report is converted (:mod:`app.eval.report_v1`);
  anything else that does not match the models is a :class:`ReportError` naming the file,
  the fields and what to do.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from app.errors import ReportError
from app.eval.metrics.base import MetricSpec, Score
from app.eval.records import (
    SCHEMA_VERSION,
    BadCase,
    BadKind,
    BadReason,
    Breakdowns,
    CaseResult,
    Distribution,
    Group,
    GroupMetric,
    MetricInfo,
    MetricVerdict,
    RefusalConfusion,
    Report,
    RunMeta,
    Totals,
)
from app.eval.stats import describe, stable_seed
from app.eval.thresholds import ThresholdSet, verdicts
from app.limits import limit
from app.paths import repo_root
from app.safe_io import UnsafeInput, parse_json, read_text

__all__ = [
    "SCHEMA_VERSION",
    "atomic_write_text",
    "bad_cases",
    "build_report",
    "load_report",
    "metric_info",
    "refusal_confusion",
    "report_filename",
    "schema_path",
    "validate_report",
    "write_report",
]


def schema_path() -> Path:
    """``reports/report.schema.json``: generated from :class:`Report` by ``make schema``."""
    return repo_root() / "reports" / "report.schema.json"


def metric_info(spec: MetricSpec) -> MetricInfo:
    return MetricInfo(
        direction=spec.direction,
        kind=spec.kind,
        unit=spec.unit,
        scale=spec.scale,
        red_line=spec.red_line,
        group=spec.group,
        description=spec.description,
    )


# ---------------------------------------------------------------- aggregates


def summarise(
    cases: Sequence[CaseResult], metric_specs: Mapping[str, MetricSpec], seed: int
) -> dict[str, Distribution]:
    out: dict[str, Distribution] = {}
    for name, spec in metric_specs.items():
        scores = [c.metrics[name] for c in cases if name in c.metrics]
        n_errors = sum(1 for s in scores if s.value is None and s.n_errors > 0)
        dist = describe(
            [s.value for s in scores],
            n_errors=n_errors,
            unit=spec.unit,
            seed=stable_seed(seed, name),
        )
        out[name] = Distribution.model_validate(dist)
    return out


def breakdown(
    cases: Sequence[CaseResult], metric_names: Iterable[str], key: Literal["tags", "difficulty"]
) -> dict[str, Group]:
    groups: dict[str, list[CaseResult]] = defaultdict(list)
    for case in cases:
        if key == "tags":
            for tag in case.tags:
                groups[tag].append(case)
        else:
            groups[case.difficulty if case.difficulty is not None else "unspecified"].append(case)
    names = list(metric_names)
    out: dict[str, Group] = {}
    for label in sorted(groups):
        members = groups[label]
        metrics: dict[str, GroupMetric] = {}
        for name in names:
            scores = [c.metrics[name] for c in members if name in c.metrics]
            vals = [s.value for s in scores if s.value is not None]
            metrics[name] = GroupMetric(
                n=len(vals),
                n_errors=sum(1 for s in scores if s.value is None and s.n_errors),
                mean=sum(vals) / len(vals) if vals else None,
            )
        out[label] = Group(cases=len(members), metrics=metrics)
    return out


def bad_cases(
    cases: Sequence[CaseResult],
    metrics: Mapping[str, MetricInfo],
    bad_judge_score: float,
) -> list[BadCase]:
    """The one "bad case" policy (seed 004 §12.3), with each reason's severity.

    Hard (a failure on every provider, offline baselines included): a red-line metric hit,
    a ``must_not_include`` text in the answer, a failed injection case, an evaluation error
    (the pipeline raised, or a judge reply stayed unparseable). Quality (fails a real
    model's run; reported for an offline baseline): a judge score below
    ``bad_judge_score`` (``thresholds.toml`` ``[bad_cases]``), a refusal error.
    """
    out: list[BadCase] = []
    judge_metrics = sorted(name for name, info in metrics.items() if info.kind == "judge")
    for case in cases:
        reasons = [
            BadReason(
                kind="red_line", hard=True, metric=n, value=case.value(n), message=f"red line {n}"
            )
            for n in case.red_lines
        ]
        reasons += _metric_reasons(case, hard=True)
        reasons += [
            BadReason(kind="error", hard=True, message=f"evaluation error: {error}")
            for error in case.errors
        ]
        for name in judge_metrics:
            value = case.value(name)
            if value is not None and value < bad_judge_score:
                reasons.append(
                    BadReason(
                        kind="judge_score",
                        hard=False,
                        metric=name,
                        value=value,
                        message=f"{name} = {value:.2f} < {bad_judge_score:g}",
                    )
                )
        reasons += _metric_reasons(case, hard=False)
        if reasons:
            out.append(BadCase(id=case.id, reasons=reasons))
    return out


# the per-metric reasons of :func:`bad_cases`: kind, metric, hard, is the value bad, message
# (``{key}``: the score's detail[key])
_METRIC_RULES: tuple[tuple[BadKind, str, bool, Callable[[float], bool], str], ...] = (
    (
        "must_not_include",
        "must_not_include",
        True,
        lambda v: v > 0,
        "must_not_include hit: {violations}",
    ),
    ("injection", "injection_resistance", True, lambda v: v == 0, "injection: {failures}"),
    ("refusal_error", "refusal_error", False, lambda v: v == 1, "refusal error ({cell})"),
)


class _Detail(dict[str, Any]):
    def __missing__(self, key: str) -> None:
        return None


def _metric_reasons(case: CaseResult, *, hard: bool) -> list[BadReason]:
    return [
        BadReason(
            kind=kind,
            hard=hard,
            metric=metric,
            value=s.value,
            message=message.format_map(_Detail(s.detail)),
        )
        for kind, metric, is_hard, is_bad, message in _METRIC_RULES
        if is_hard is hard
        and (s := case.metrics.get(metric)) is not None
        and s.value is not None
        and is_bad(s.value)
    ]


def refusal_confusion(per_case: Iterable[Mapping[str, Score]]) -> RefusalConfusion:
    """Expected × actual refusals from each case's ``refusal_error`` score."""
    cells: Counter[str] = Counter()
    for metrics in per_case:
        score = metrics.get("refusal_error")
        cell = score.detail.get("cell") if score is not None else None
        if cell:
            cells[str(cell)] += 1
    total = sum(cells.values())
    wrong = cells["missed_refusal"] + cells["false_refusal"]
    return RefusalConfusion(
        true_refusal=cells["true_refusal"],
        missed_refusal=cells["missed_refusal"],
        false_refusal=cells["false_refusal"],
        true_answer=cells["true_answer"],
        error_rate=wrong / total if total else None,
    )


def red_line_hits(
    cases: Sequence[CaseResult], metric_specs: Mapping[str, MetricSpec]
) -> dict[str, int]:
    return {
        name: sum(1 for c in cases if (c.value(name) or 0) > 0)
        for name, spec in metric_specs.items()
        if spec.red_line
    }


def build_report(
    *,
    run_id: str,
    created_at: str,
    meta: RunMeta,
    metric_specs: Mapping[str, MetricSpec],
    cases: Sequence[CaseResult],
    thresholds: ThresholdSet,
    totals: Totals,
    partial_reason: str | None = None,
    measured: Collection[str] | None = None,
) -> Report:
    """Assemble the report; cases are sorted by id so the file never depends on run order.

    ``measured`` names the metrics the run computed (``None``: all); a threshold on any
    other metric is ``not_measured`` and fails the run."""
    ordered = sorted(cases, key=lambda c: c.id)
    summary = summarise(ordered, metric_specs, meta.seed)
    reds = red_line_hits(ordered, metric_specs)
    raw_verdicts = verdicts(
        thresholds,
        {k: d.model_dump() for k, d in summary.items()},
        reds,
        measured,
        max_errors=meta.config.max_errors,
    )
    verdict_map = {k: MetricVerdict.model_validate(v) for k, v in raw_verdicts.items()}
    failed = any(v.verdict in ("fail", "not_measured") for v in verdict_map.values())
    partial = partial_reason is not None
    infos = {name: metric_info(spec) for name, spec in metric_specs.items()}
    return Report(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        created_at=created_at,
        status="partial" if partial else ("fail" if failed else "pass"),
        partial=partial,
        partial_reason=partial_reason,
        meta=meta,
        metrics=infos,
        totals=totals,
        summary=summary,
        verdicts=verdict_map,
        breakdowns=Breakdowns(
            by_tag=breakdown(ordered, metric_specs, "tags"),
            by_difficulty=breakdown(ordered, metric_specs, "difficulty"),
        ),
        refusal_confusion=refusal_confusion(c.metrics for c in ordered),
        bad_cases=bad_cases(ordered, infos, thresholds.bad_judge_score),
        cases=ordered,
    )


# ---------------------------------------------------------------- writing


def check_finite(data: object, where: str) -> None:
    """Refuse NaN/infinity anywhere in ``data`` (a model's ``model_dump()``).

    The C JSON encoder with ``allow_nan=False`` checks the whole tree in one fast pass;
    only when it finds one does :func:`assert_no_nan` walk the tree to name the field."""
    try:
        json.dumps(data, allow_nan=False, default=str, skipkeys=True, check_circular=False)
    except ValueError:
        assert_no_nan(data, where)
        raise ReportError(f"{where}: a value is not a finite number") from None


def assert_no_nan(node: object, where: str) -> None:
    if isinstance(node, float) and not math.isfinite(node):
        raise ReportError(f"{where} is {node}: undefined values must be null with a reason")
    if isinstance(node, Mapping):
        for key, value in node.items():
            assert_no_nan(value, f"{where}.{key}")
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            assert_no_nan(value, f"{where}[{i}]")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def sweep_stale_temp_files(folder: Path) -> list[Path]:
    """Remove ``.<name>.<pid>.<random>.tmp`` files whose writing process is gone (a kill
    between creating and renaming them); returns what was removed."""
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    for tmp in folder.glob(".*.tmp"):
        parts = tmp.name.split(".")
        pid = next((int(x) for x in reversed(parts[:-2]) if x.isdigit()), None)
        if pid is not None and pid != os.getpid() and not _pid_alive(pid):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def _chmod_ordinary(fd: int) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)  # temp files are 0600; a report is an ordinary file


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (temp file in the same folder + rename).
    The temp file's name carries the writer's pid, so a later write sweeps what a killed
    writer left behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_stale_temp_files(path.parent)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
            _chmod_ordinary(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _candidates(path: Path) -> Iterator[Path]:
    yield path
    for n in range(2, 1000):
        yield path.with_name(f"{path.stem}-{n}{path.suffix}")


def _link_unnamed(path: Path, data: bytes) -> Path | None:
    """Linux: write into an unnamed ``O_TMPFILE`` and link it in when complete (a kill
    leaves nothing); None where that is not available."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None:
        return None
    try:
        fd = os.open(path.parent, flag | os.O_WRONLY, 0o666)
    except OSError:
        return None
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            _chmod_ordinary(fh.fileno())
            for target in _candidates(path):
                try:  # linkat(AT_SYMLINK_FOLLOW) through /proc: a dir_fd selects linkat
                    os.link(f"/proc/self/fd/{fh.fileno()}", target.name, dst_dir_fd=dir_fd)
                except FileExistsError:
                    continue
                except OSError:  # no /proc, or a file system that refuses: fall back
                    return None
                return target
    finally:
        os.close(dir_fd)
    raise ReportError(f"{path}: 999 files of that name exist; clean up the folder")


def write_new_text(path: Path, text: str) -> Path:
    """Write ``text`` to a *new* file at ``path`` (or ``<stem>-2``, ``-3``… if it exists) and
    return where; never replaces a file, never leaves a half-written or temp file.

    On Linux the text goes into an unnamed file (``O_TMPFILE``) that is linked into place
    only when complete: a ``kill -9`` at any moment leaves no file at all. Elsewhere a
    pid-named temp file is linked (not renamed: a link refuses to replace) and removed; a
    temp file a killed writer left is swept by the next write. Two processes writing the
    same name both keep their file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    written = _link_unnamed(path, data)
    if written is not None:
        return written
    sweep_stale_temp_files(path.parent)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            _chmod_ordinary(fh.fileno())
        for target in _candidates(path):
            try:
                os.link(tmp, target)
            except FileExistsError:
                continue
            return target
        raise ReportError(f"{path}: 999 files of that name exist; clean up the folder")
    finally:
        Path(tmp).unlink(missing_ok=True)


def report_filename(created_at: str, run_id: str | None = None) -> str:
    """``eval_<UTC>-<run id's random part>.json``: unique per run, sorted by time."""
    stamp = created_at.replace("-", "").replace(":", "")  # 20261130T190000Z
    return f"eval_{stamp}-{run_id[-6:]}.json" if run_id else f"eval_{stamp}.json"


def report_json(report: Report) -> str:
    """The file's text. NaN/infinity anywhere (a metric's ``detail`` included) is refused:
    pydantic would write it as ``null`` and lose the fact that it was not a number."""
    check_finite(report.model_dump(), "report")
    # no re-validation here: ``report`` was built and validated by the typed models, and
    # load_report reads their JSON back unchanged (tests/unit/eval/test_report_fast_write.py)
    return report.model_dump_json(indent=1) + "\n"


def write_report(report: Report, out_dir: Path) -> tuple[Path, Path]:
    """Write ``eval_<UTC>-<run>.json`` and its ``.md`` as new files (:func:`write_new_text`):
    nothing on a refusal, never a temp file after a kill, never another run's report
    replaced — concurrent runs with the same ``--out`` each keep theirs."""
    from app.eval.render import render_markdown

    text = report_json(report)
    path = write_new_text(out_dir / report_filename(report.created_at, report.run_id), text)
    md = write_new_text(path.with_suffix(".md"), render_markdown(report))
    return path, md


# ---------------------------------------------------------------- reading


def validation_problems(exc: ValidationError, data: object = None, limit: int = 10) -> str:
    """The errors of ``exc`` one per line: the field's path (a case named by its id), the
    problem, and the value that was there."""
    errors = exc.errors(include_url=False)
    cases = data.get("cases") if isinstance(data, Mapping) else None
    lines = []
    for e in errors[:limit]:
        loc = [str(p) for p in e["loc"]]
        if len(loc) >= 2 and loc[0] == "cases" and isinstance(cases, list):
            i = int(loc[1])
            case = cases[i] if i < len(cases) else None
            cid = case.get("id") if isinstance(case, Mapping) else None
            loc[1] = f"{i} ({cid})" if isinstance(cid, str) else loc[1]
        got = e.get("input")
        shown = "" if isinstance(got, Mapping | list) else f" (got {str(repr(got))[:60]})"
        lines.append(f"  {'/'.join(loc) or '<root>'}: {e['msg']}{shown}")
    more = f"\n  … and {len(errors) - limit} more" if len(errors) > limit else ""
    return f"{len(errors)} problem(s):\n" + "\n".join(lines) + more


def validate_report(data: object, source: str = "report") -> Report:
    """A :class:`Report` from parsed JSON, or a :class:`ReportError` listing what is wrong.

    ``schema_version`` "1" is converted first (:func:`app.eval.report_v1.upgrade`).
    """
    if isinstance(data, Report):
        return data
    if not isinstance(data, Mapping):
        raise ReportError(f"{source}: a report is a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if version == "1":
        from app.eval.report_v1 import upgrade

        return upgrade(data, source)
    if version != SCHEMA_VERSION:
        raise ReportError(
            f"{source}: schema_version {version!r} is not one this rag-starter reads "
            f"(it writes {SCHEMA_VERSION!r} and converts '1'); was it written by "
            "`rag eval run`? Re-run the suite with this version to get a readable report."
        )
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        raise ReportError(
            f"{source}: not a valid schema_version {SCHEMA_VERSION} report "
            f"(see {schema_path().name}); {validation_problems(exc, data)}"
        ) from None


def load_report(path: Path) -> Report:
    """Read a report file (the one typed reader); every problem is a :class:`ReportError`."""
    path = Path(path)
    # app.safe_io: a FIFO, device, loop, directory or over-size file is refused unread; bad
    # UTF-8 and bad JSON name line and column; NaN / Infinity / 1e999 are refused at parse
    try:
        text = read_text(path, max_bytes=limit("report_file_bytes"), what="report")
    except UnsafeInput as exc:
        if exc.problem == "not found":
            raise ReportError(f"{path}: no such report; pass a reports/eval_*.json file") from None
        raise ReportError(f"{exc}; is this an eval report?") from None
    try:
        data = parse_json(text, path, what="report")
    except UnsafeInput as exc:
        raise ReportError(f"{exc}; is this an eval report?") from None
    return validate_report(data, str(path))
