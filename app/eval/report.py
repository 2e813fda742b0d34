"""Build, validate and write evaluation reports (JSON + markdown summary).

The JSON is validated against ``reports/report.schema.json`` before it is written, then
written atomically (a temporary file in the same folder + ``os.replace``), with
``allow_nan=False`` so a NaN can never reach the file.
"""

from __future__ import annotations

import functools
import json
import math
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from app.errors import ReportError
from app.eval.metrics.base import MetricSpec
from app.eval.stats import describe, stable_seed
from app.eval.thresholds import ThresholdSet, verdicts
from app.paths import repo_root

SCHEMA_VERSION = "1"
BAD_JUDGE_SCORE = 3.0


def schema_path() -> Path:
    return repo_root() / "reports" / "report.schema.json"


@functools.lru_cache(maxsize=4)
def _schema(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def validate_report(report: Mapping[str, Any]) -> None:
    """Raise :class:`ReportError` listing every schema violation (up to 10)."""
    import jsonschema  # type: ignore[import-untyped]

    validator = jsonschema.Draft202012Validator(_schema(schema_path()))
    errors = sorted(validator.iter_errors(report), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [
            f"  {'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors[:10]
        ]
        raise ReportError(
            f"report does not match {schema_path()} ({len(errors)} problem(s)):\n"
            + "\n".join(lines)
        )
    _assert_no_nan(report, "report")


def _assert_no_nan(node: Any, where: str) -> None:
    if isinstance(node, float) and not math.isfinite(node):
        raise ReportError(f"{where} is {node}: undefined values must be null with a reason")
    if isinstance(node, Mapping):
        for key, value in node.items():
            _assert_no_nan(value, f"{where}.{key}")
    elif isinstance(node, list | tuple):
        for i, value in enumerate(node):
            _assert_no_nan(value, f"{where}[{i}]")


def summarise(
    cases: Sequence[Mapping[str, Any]], metric_specs: Mapping[str, MetricSpec], seed: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, spec in metric_specs.items():
        scores = [c["metrics"][name] for c in cases if name in c["metrics"]]
        values = [s["value"] for s in scores]
        n_errors = sum(1 for s in scores if s["value"] is None and s.get("n_errors", 0) > 0)
        out[name] = describe(
            values, n_errors=n_errors, unit=spec.unit, seed=stable_seed(seed, name)
        )
    return out


def breakdown(
    cases: Sequence[Mapping[str, Any]],
    metric_names: Iterable[str],
    key: str,
) -> dict[str, Any]:
    groups: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for case in cases:
        labels = case.get(key)
        if key == "tags":
            for tag in labels or []:
                groups[tag].append(case)
        else:
            groups[str(labels) if labels is not None else "unspecified"].append(case)
    names = list(metric_names)
    out: dict[str, Any] = {}
    for label in sorted(groups):
        members = groups[label]
        metrics: dict[str, Any] = {}
        for name in names:
            scores = [c["metrics"][name] for c in members if name in c["metrics"]]
            vals = [s["value"] for s in scores if s["value"] is not None]
            metrics[name] = {
                "n": len(vals),
                "n_errors": sum(1 for s in scores if s["value"] is None and s.get("n_errors", 0)),
                "mean": sum(vals) / len(vals) if vals else None,
            }
        out[label] = {"cases": len(members), "metrics": metrics}
    return out


def bad_cases(
    cases: Sequence[Mapping[str, Any]], metric_specs: Mapping[str, MetricSpec]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for case in cases:
        reasons: list[str] = []
        for name, spec in metric_specs.items():
            score = case["metrics"].get(name)
            if score is None or score["value"] is None:
                continue
            if spec.kind == "judge" and score["value"] < BAD_JUDGE_SCORE:
                reasons.append(f"{name} = {score['value']:.2f} < {BAD_JUDGE_SCORE:g}")
            if spec.red_line and score["value"] > 0:
                reasons.append(f"red line {name}")
        if case.get("errors"):
            reasons.append(f"errors: {case['errors'][0]}")
        if reasons:
            out.append({"id": case["id"], "reasons": reasons})
    return out


def refusal_confusion(cases: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    cells: Counter[str] = Counter()
    for case in cases:
        score = case["metrics"].get("refusal_error")
        cell = score.get("detail", {}).get("cell") if score else None
        if cell:
            cells[cell] += 1
    total = sum(cells.values())
    wrong = cells["missed_refusal"] + cells["false_refusal"]
    return {
        "true_refusal": cells["true_refusal"],
        "missed_refusal": cells["missed_refusal"],
        "false_refusal": cells["false_refusal"],
        "true_answer": cells["true_answer"],
        "error_rate": wrong / total if total else None,
    }


def red_line_hits(
    cases: Sequence[Mapping[str, Any]], metric_specs: Mapping[str, MetricSpec]
) -> dict[str, int]:
    hits: dict[str, int] = {}
    for name, spec in metric_specs.items():
        if spec.red_line:
            hits[name] = sum(
                1
                for c in cases
                if (s := c["metrics"].get(name)) is not None and (s["value"] or 0) > 0
            )
    return hits


def build_report(
    *,
    run_id: str,
    created_at: str,
    meta: dict[str, Any],
    metric_specs: Mapping[str, MetricSpec],
    cases: Sequence[dict[str, Any]],
    thresholds: ThresholdSet,
    totals: dict[str, Any],
    partial_reason: str | None = None,
) -> dict[str, Any]:
    """Assemble the report; cases are sorted by id so the file never depends on run order."""
    ordered = sorted(cases, key=lambda c: c["id"])
    summary = summarise(ordered, metric_specs, int(meta.get("seed", 0)))
    reds = red_line_hits(ordered, metric_specs)
    verdict_map = verdicts(thresholds, summary, reds)
    failed = any(v["verdict"] == "fail" for v in verdict_map.values())
    partial = partial_reason is not None
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "created_at": created_at,
        "partial": partial,
        "partial_reason": partial_reason,
        "status": "partial" if partial else ("fail" if failed else "pass"),
        "meta": meta,
        "metrics": {name: spec.as_json() for name, spec in metric_specs.items()},
        "cases": ordered,
        "summary": summary,
        "breakdowns": {
            "by_tag": breakdown(ordered, metric_specs, "tags"),
            "by_difficulty": breakdown(ordered, metric_specs, "difficulty"),
        },
        "refusal_confusion": refusal_confusion(ordered),
        "bad_cases": bad_cases(ordered, metric_specs),
        "verdicts": verdict_map,
        "totals": totals,
    }


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def report_filename(created_at: str) -> str:
    stamp = created_at.replace("-", "").replace(":", "")  # 20261130T190000Z
    return f"eval_{stamp}.json"


def write_report(report: Mapping[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Validate, then write ``eval_<UTC>.json`` and ``eval_<UTC>.md`` atomically."""
    validate_report(report)
    path = out_dir / report_filename(str(report["created_at"]))
    if path.exists():  # two runs in the same second: keep both
        path = path.with_name(f"{path.stem}-{str(report['run_id'])[-6:]}.json")
    text = json.dumps(report, ensure_ascii=False, indent=1, allow_nan=False, sort_keys=False)
    atomic_write_text(path, text + "\n")
    md = path.with_suffix(".md")
    atomic_write_text(md, render_markdown(report))
    return path, md


def load_report(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: cannot read report ({exc})") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: not a report (top level is not an object)")
    return data


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def summary_rows(report: Mapping[str, Any]) -> list[list[str]]:
    """metric, n, errors, mean, std, 95 % CI, threshold, verdict — one row per metric."""
    rows: list[list[str]] = []
    for name, dist in report["summary"].items():
        verdict = report["verdicts"].get(name)
        ci = dist.get("ci95")
        rows.append(
            [
                name,
                str(dist["n"]),
                str(dist["n_errors"]),
                _fmt(dist["mean"]),
                _fmt(dist["std"]),
                f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "—",
                verdict["threshold"] if verdict else "",
                {"pass": "✅ pass", "fail": "❌ FAIL", "no_data": "· no data"}[verdict["verdict"]]
                if verdict
                else "",
            ]
        )
    return rows


def render_markdown(report: Mapping[str, Any]) -> str:
    meta = report["meta"]
    judge = meta["judge"]
    lines = [
        f"# Evaluation {report['run_id']} — {meta['suite']} — {report['status'].upper()}",
        "",
        f"- created: {report['created_at']}; git {meta['git']['sha'] or '?'}"
        + (" (dirty)" if meta["git"]["dirty"] else ""),
        f"- candidate: `{meta['candidate']['provider']}`"
        + (" (offline baseline — not a model's numbers)" if meta["candidate"]["offline"] else ""),
        f"- judge: `{judge['provider']}` × {judge['samples']} samples"
        + (" (offline reference judge)" if judge["offline"] else ""),
        "- prompts: " + ", ".join(f"`{p['version']}`" for p in meta["prompts"].values()),
        "- datasets: "
        + ", ".join(f"{d['name']} v{d['version']} ({d['sha256'][:12]}…)" for d in meta["datasets"]),
        f"- cases: {report['totals']['cases_done']}/{report['totals']['cases_planned']}"
        f"; judge errors: {report['totals']['judge_errors']}; cost ${report['totals']['cost_usd']:.4f}",
    ]
    if report["partial"]:
        lines.append(f"- **PARTIAL**: {report['partial_reason']}")
    for warning in judge["warnings"]:
        lines.append(f"- ⚠️ {warning}")
    lines += [
        "",
        "| metric | n | errors | mean | std | 95% CI | threshold | verdict |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(report)]
    rc = report["refusal_confusion"]
    lines += [
        "",
        "Refusals (expected × actual): "
        f"refused when expected {rc['true_refusal']}, answered when expected {rc['true_answer']}, "
        f"missed refusals {rc['missed_refusal']}, false refusals {rc['false_refusal']}.",
        "",
        f"## Bad cases ({len(report['bad_cases'])})",
        "",
    ]
    lines += [f"- `{b['id']}`: {'; '.join(b['reasons'])}" for b in report["bad_cases"]] or ["none"]
    return "\n".join(lines) + "\n"
