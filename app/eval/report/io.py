"""Build, write and read evaluation reports (:class:`~app.eval.report.records.Report`).

* :func:`build_report` turns the case results into a :class:`Report` (summary,
  breakdowns, verdicts, the bad cases);
* :func:`bad_cases` is the one "bad case" policy: the report computes it, and the pytest
  front end, ``scripts/ci_eval.py`` and the HTML page read ``report.bad_cases``;
* :func:`write_report` writes ``report.model_dump_json()`` as a new file, atomically
  (:func:`app.safe_io.write_new_chunks`) after refusing any NaN/infinity, plus the markdown
  summary beside it (:mod:`app.eval.report.render`);
* :func:`load_report` is the one typed reader: every part of the project that opens a
  report file calls it. A schema version 1 report is converted (:mod:`app.eval.report.v1`);
  anything else that does not match the models is a :class:`ReportError` naming the file,
  the fields and what to do.
"""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from app.errors import ReportError
from app.eval.report.outcome import with_outcome
from app.eval.report.records import (
    SCHEMA_VERSION,
    CaseResult,
    MetricVerdict,
    Report,
    ReportSummary,
    RunMeta,
    Totals,
    validation_problems,
)
from app.eval.report.status import run_status
from app.eval.report.summary import (
    SummaryParts,
    bad_cases,
    digest,
    metric_info,
    refusal_confusion,
    summary_parts,
)
from app.eval.scoring.base import MetricSpec
from app.eval.scoring.thresholds import ThresholdSet, verdicts
from app.limits import limit
from app.paths import repo_root
from app.safe_io import (  # the one home of atomic writes
    Chunks,
    UnsafeInput,
    parse_json,
    read_text,
    write_new_chunks,
    write_new_text,
)
from app.wellformed import clean, model_json

__all__ = [
    "SCHEMA_VERSION",
    "bad_cases",
    "build_report",
    "build_summary",
    "load_report",
    "metric_info",
    "refusal_confusion",
    "report_filename",
    "schema_path",
    "validate_report",
    "write_report",
    "write_report_rows",
]


def schema_path() -> Path:
    """``reports/report.schema.json``: generated from :class:`Report` by ``make schema``."""
    return repo_root() / "reports" / "report.schema.json"


def build_summary(
    *,
    run_id: str,
    created_at: str,
    meta: RunMeta,
    metric_specs: Mapping[str, MetricSpec],
    parts: SummaryParts,
    thresholds: ThresholdSet,
    totals: Totals,
    partial_reason: str | None = None,
    measured: Collection[str] | None = None,
) -> ReportSummary:
    """The report without its cases, from :func:`app.eval.report.summary.summary_parts` of the
    cases' digests. ``measured`` names the metrics the run computed (``None``: all); a
    threshold on any other metric is ``not_measured`` and fails the run. The status and its
    line are :func:`app.eval.report.status.run_status` under ``meta.config.gate``."""
    raw_verdicts = verdicts(
        thresholds,
        {k: d.model_dump() for k, d in parts.summary.items()},
        parts.red_line_hits,
        measured,
        max_errors=meta.config.max_errors,
    )
    verdict_map = {k: MetricVerdict.model_validate(v) for k, v in raw_verdicts.items()}
    partial = partial_reason is not None
    infos = {name: metric_info(spec) for name, spec in metric_specs.items()}
    shard = meta.shard
    status = run_status(
        gate=meta.config.gate,
        verdicts=verdict_map,
        red_lines=[name for name, spec in metric_specs.items() if spec.red_line],
        partial_reason=partial_reason,
        cases_done=totals.cases_done,
        cases_planned=totals.cases_planned,
        candidate_offline=meta.candidate.offline,
        judge_offline=bool(meta.judge.offline),
        shard=None if shard is None else (shard.index, shard.count, shard.planned),
        weak_judge_metrics=[n for n, spec in metric_specs.items() if spec.kind == "judge"]
        if meta.judge.weak
        else (),
    )
    return ReportSummary(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        created_at=created_at,
        status=status.status,
        status_line=status.line,
        partial=partial,
        partial_reason=partial_reason,
        meta=meta,
        metrics=infos,
        totals=totals,
        summary=parts.summary,
        verdicts=verdict_map,
        breakdowns=parts.breakdowns,
        refusal_confusion=parts.refusal_confusion,
        bad_cases=parts.bad_cases,
        outcomes=parts.outcomes,
    )


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
    sent_texts: Mapping[str, str] | None = None,
) -> Report:
    """Assemble the report; cases are sorted by id so the file never depends on run order.

    The summary is :func:`build_summary` of the cases' digests (the runner's streaming
    path computes it the same way). Each sent message's text moves into the report's
    ``sent_texts`` (once per distinct text); ``sent_texts`` supplies the texts of cases that
    refer to them already (shard reports being merged). The runner's streamed report keeps
    the texts inline in each case instead (``content``, at most ``SENT_MESSAGE_LIMIT`` each)."""
    texts = dict(sent_texts or {})
    ordered = [
        _shared_texts(with_outcome(c, thresholds.bad_judge_score), texts)
        for c in sorted(cases, key=lambda c: c.id)
    ]
    used = {m.sha256 for c in ordered if c.trace is not None for m in c.trace.sent}
    judges = sorted(n for n, spec in metric_specs.items() if spec.kind == "judge")
    digests = [digest(c, judges, thresholds.bad_judge_score) for c in ordered]
    summary = build_summary(
        run_id=run_id,
        created_at=created_at,
        meta=meta,
        metric_specs=metric_specs,
        parts=summary_parts(digests, metric_specs, meta.seed),
        thresholds=thresholds,
        totals=totals,
        partial_reason=partial_reason,
        measured=measured,
    )
    texts_used = {h: texts[h] for h in sorted(used) if h in texts}
    fields = {**dict(summary), "sent_texts": texts_used}
    return Report(**fields, cases=ordered)  # instances are not re-validated


def _shared_texts(case: CaseResult, texts: dict[str, str]) -> CaseResult:
    """``case`` with its sent messages' texts moved into ``texts`` (keyed by sha256)."""
    trace = case.trace
    if trace is None or all(m.content is None for m in trace.sent):
        return case
    for m in trace.sent:
        if m.content is not None:
            texts.setdefault(m.sha256, m.content)
    sent = [m.model_copy(update={"content": None}) for m in trace.sent]
    return case.model_copy(update={"trace": trace.model_copy(update={"sent": sent})})


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


def report_filename(created_at: str, run_id: str | None = None) -> str:
    """``eval_<UTC>-<run id's random part>.json``: unique per run, sorted by time."""
    stamp = created_at.replace("-", "").replace(":", "")  # 20261130T190000Z
    return f"eval_{stamp}-{run_id[-6:]}.json" if run_id else f"eval_{stamp}.json"


def _summary_head(summary: ReportSummary) -> bytes:
    """The summary's JSON without its closing brace (the ``cases`` array follows).

    The bad cases (one per bad case: tens of thousands in a 100,000-case run) are dumped one
    at a time into their place in the text, never as one tree of dicts: the same bytes as
    dumping the whole summary at once."""
    exclude = {"cases", "bad_cases"} if isinstance(summary, Report) else {"bad_cases"}
    data = summary.model_dump(mode="json", exclude=exclude)
    check_finite(data, "report")
    token = f"bad-cases-{secrets.token_hex(16)}"
    order = list(type(summary).model_fields)
    at = order.index("bad_cases")
    # the summary's fields in the model's order, the bad cases' place held by the token
    data = {
        **{k: data[k] for k in order[:at] if k in data},
        "bad_cases": token,
        **{k: data[k] for k in order[at + 1 :] if k in data},
    }
    head = json.dumps(
        data, ensure_ascii=False, allow_nan=False, separators=(",", ":"), check_circular=False
    )
    before, after = head.split(json.dumps(token), 1)
    parts = [before, "["]
    for i, bad in enumerate(summary.bad_cases):
        one = bad.model_dump(mode="json")
        check_finite(one, f"report.bad_cases[{i}]")
        if i:
            parts.append(",")
        parts.append(
            json.dumps(
                one,
                ensure_ascii=False,
                allow_nan=False,
                separators=(",", ":"),
                check_circular=False,
            )
        )
    parts.append("]")
    parts.append(after[:-1])
    return clean("".join(parts)).encode("utf-8")


def report_chunks(summary: ReportSummary, case_rows: Callable[[], Iterable[str]]) -> Chunks:
    """The bytes of a report file: the summary, then ``"cases":[`` and one case's
    ``model_dump_json()`` per line, in the order given (sorted by id)."""

    def chunks() -> Iterator[bytes]:
        yield _summary_head(summary) + b',"cases":[\n'
        first = True
        for row in case_rows():
            yield (row if first else ",\n" + row).encode("utf-8")
            first = False
        yield b"\n]}\n"

    return chunks


def checked_rows(report: Report) -> Iterator[str]:
    for i, case in enumerate(report.cases):
        # NaN/infinity anywhere (a metric's ``detail`` included) is refused: pydantic would
        # write it as ``null`` and lose the fact that it was not a number
        check_finite(case.model_dump(), f"report.cases[{i}]")
        yield model_json(case)


def report_json(report: Report) -> str:
    """The file's text (:func:`report_chunks`). No re-validation: ``report`` was built and
    validated by the typed models, and load_report reads their JSON back unchanged
    (tests/unit/eval/test_report_fast_write.py)."""
    return b"".join(report_chunks(report, lambda: checked_rows(report))()).decode("utf-8")


def write_report(report: Report, out_dir: Path) -> tuple[Path, Path]:
    """Write ``eval_<UTC>-<run>.json`` and its ``.md`` as new files (:func:`write_new_text`):
    nothing on a refusal, never a temp file after a kill, never another run's report
    replaced — concurrent runs with the same ``--out`` each keep theirs."""
    return write_report_rows(report, lambda: checked_rows(report), out_dir)


def write_report_rows(
    summary: ReportSummary, case_rows: Callable[[], Iterable[str]], out_dir: Path
) -> tuple[Path, Path]:
    """:func:`write_report` of a summary and its cases' JSON texts (each a
    ``CaseResult.model_dump_json()`` already checked for NaN, sorted by id), streamed to
    the file: the runner writes its report from the checkpoint's rows without loading the
    cases. ``case_rows`` may be called twice (see :func:`write_new_chunks`)."""
    from app.eval.report.render import render_markdown

    name = report_filename(summary.created_at, summary.run_id)
    path = write_new_chunks(out_dir / name, report_chunks(summary, case_rows))
    md = write_new_text(path.with_suffix(".md"), render_markdown(summary))
    return path, md


# ---------------------------------------------------------------- reading


def validate_report(data: object, source: str = "report") -> Report:
    """A :class:`Report` from parsed JSON, or a :class:`ReportError` listing what is wrong.

    ``schema_version`` "1" is converted first (:func:`app.eval.report.v1.upgrade`).
    """
    if isinstance(data, Report):
        return data
    if not isinstance(data, Mapping):
        raise ReportError(f"{source}: a report is a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if version == "1":
        from app.eval.report.v1 import upgrade

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


def load_report(path: Path, *, traces: bool = True) -> Report:
    """Read a report file (the one typed reader); every problem is a :class:`ReportError`.

    ``traces=False`` (``rag eval compare``, which reads no trace): each case's ``trace`` is
    dropped after parsing, before validation, so neither time nor memory is spent on the
    typed traces (most of a report); the cases come back with ``trace=None``.
    """
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
    del text
    if not traces and isinstance(data, dict) and data.get("schema_version") == SCHEMA_VERSION:
        for case in data.get("cases") or ():
            if isinstance(case, dict) and "trace" in case:
                case["trace"] = None
    return validate_report(data, str(path))
