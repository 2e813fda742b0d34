"""Upload a finished eval report to Langfuse as a dataset run (seed 004 §12.1).

``export_run(report)`` uses the official ``langfuse`` SDK (v3+ API: datasets, dataset items,
and ``run_experiment`` — the SDK's dataset run, whose traces are linked to the dataset
items through OpenTelemetry attributes):

* one Langfuse **dataset** per suite version (``rag-starter/<suite>_v<version>``), created
  (upserted) with the dataset file's sha256 in its metadata;
* one **dataset item** per case, with a stable id (uuid5 of dataset name + case id, so a
  re-export updates instead of duplicating): input = question (+ history), expected output
  = golden answer, metadata = case id, tags, difficulty;
* one **trace per case** in the run (``run_name`` = the report's run id): its output is the
  answer the run recorded — nothing is re-generated — and its metadata carries the prompt
  version(s), the candidate and judge models and the case id;
* one **score per metric** per case (``null`` values are skipped: they are recorded errors,
  not scores), with the judge's reason as the comment.

Credentials come from ``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY`` and ``LANGFUSE_HOST``
(or ``LANGFUSE_BASE_URL``); a missing one is a :class:`~app.errors.ConfigError` that names
it. The harness calls this after writing the report (``rag eval run --langfuse``).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.errors import ConfigError, ReportError
from app.eval.records import Report

log = logging.getLogger(__name__)

ENV_KEYS = ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST")
_NAMESPACE = uuid.UUID("6f1c3f55-5a8e-4c53-9f7e-2b7e0d5f3a10")


@dataclass(frozen=True)
class ExportSummary:
    dataset: str
    run_name: str
    items: int
    traces: int
    scores: int
    skipped_null_scores: int
    experiment_id: str | None
    url: str | None


def require_env(env: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """``(public key, secret key, host)`` or a :class:`ConfigError` naming what is missing.

    Cheap: call it before a run so ``--langfuse`` fails in a second, not after the suite.
    """
    env = os.environ if env is None else env
    host = env.get("LANGFUSE_HOST") or env.get("LANGFUSE_BASE_URL") or ""
    missing = [k for k in ENV_KEYS[:2] if not env.get(k)]
    if not host:
        missing.append("LANGFUSE_HOST")
    if missing:
        raise ConfigError(
            f"--langfuse needs {', '.join(missing)} in the environment (the project's "
            "public and secret API keys and the Langfuse URL, e.g. LANGFUSE_HOST="
            "https://cloud.langfuse.com); set them or drop --langfuse"
        )
    return env["LANGFUSE_PUBLIC_KEY"], env["LANGFUSE_SECRET_KEY"], host


def make_client(env: Mapping[str, str] | None = None) -> Any:
    """A ``langfuse.Langfuse`` client from the environment, or a :class:`ConfigError`."""
    public_key, secret_key, host = require_env(env)
    try:
        from langfuse import Langfuse
    except ImportError:  # pragma: no cover - langfuse is a declared dependency
        raise ConfigError("--langfuse needs the langfuse package: pip install langfuse") from None
    return Langfuse(public_key=public_key, secret_key=secret_key, base_url=host)


def dataset_name(report: Mapping[str, Any]) -> str:
    datasets = (report.get("meta") or {}).get("datasets") or []
    if not datasets:
        raise ReportError("report has no meta.datasets: cannot name the Langfuse dataset")
    parts = [f"{d.get('name')}_v{d.get('version')}" for d in datasets]
    return "rag-starter/" + "+".join(parts)


def item_id(dataset: str, case_id: str) -> str:
    """Stable across exports (re-export upserts); unique across datasets as Langfuse needs."""
    return str(uuid.uuid5(_NAMESPACE, f"{dataset}\x00{case_id}"))


def _prompt_versions(report: Mapping[str, Any], case: Mapping[str, Any]) -> str:
    trace = case.get("trace") or {}
    if isinstance(trace, Mapping) and trace.get("prompt_version"):
        return str(trace["prompt_version"])
    prompts = (report.get("meta") or {}).get("prompts") or {}
    return ", ".join(str(p.get("version")) for _, p in sorted(prompts.items()))


def _value(entry: Any) -> float | None:
    value = entry.get("value") if isinstance(entry, Mapping) else entry
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


def export_run(
    report: Mapping[str, Any] | Report,
    *,
    client: Any = None,
    run_name: str | None = None,
    max_concurrency: int = 8,
) -> ExportSummary:
    """Upload ``report`` (a loaded report dict) as a Langfuse dataset run; see module doc."""
    from langfuse import Evaluation

    if isinstance(report, Report):
        report = report.model_dump(mode="json")

    lf = make_client() if client is None else client
    meta = report.get("meta") or {}
    cases = [c for c in report.get("cases") or [] if isinstance(c, Mapping) and c.get("id")]
    if not cases:
        raise ReportError("report has no cases to export")
    name = dataset_name(report)
    run = run_name or str(report.get("run_id") or "rag-starter-run")
    ds_meta = {"datasets": meta.get("datasets"), "source": "rag-starter"}
    lf.create_dataset(name=name, description="rag-starter golden cases", metadata=ds_meta)

    by_item: dict[str, Mapping[str, Any]] = {}
    items = []
    for case in cases:
        iid = item_id(name, str(case["id"]))
        by_item[iid] = case
        items.append(
            lf.create_dataset_item(
                dataset_name=name,
                id=iid,
                input={"question": case.get("question"), "history": case.get("history") or []},
                expected_output=case.get("golden_answer"),
                metadata={
                    "case_id": case["id"],
                    "tags": list(case.get("tags") or []),
                    "difficulty": case.get("difficulty"),
                },
            )
        )

    candidate = str((meta.get("candidate") or {}).get("provider", ""))
    judge = str((meta.get("judge") or {}).get("provider", ""))
    run_meta = {
        "run_id": str(report.get("run_id", "")),
        "git_sha": str(meta.get("git_sha", "")),
        "candidate": candidate,
        "judge": judge,
        "prompt_versions": _prompt_versions(report, {}),
    }
    skipped = 0

    def task(*, item: Any, **_: Any) -> Any:
        case = by_item[item.id]
        lf.update_current_span(
            metadata={
                "case_id": case["id"],
                "prompt_version": _prompt_versions(report, case),
                "candidate": candidate,
                "judge": judge,
            }
        )
        return case.get("answer")

    def report_scores(*, metadata: Any = None, **_: Any) -> list[Any]:
        nonlocal skipped
        case_id = (metadata or {}).get("case_id")
        case = next(c for c in cases if c["id"] == case_id)
        out = []
        for metric, entry in sorted((case.get("metrics") or {}).items()):
            value = _value(entry)
            if value is None:
                skipped += 1
                continue
            reason = entry.get("reason") if isinstance(entry, Mapping) else None
            out.append(Evaluation(name=metric, value=value, comment=reason, data_type="NUMERIC"))
        return out

    result = lf.run_experiment(
        name=f"rag-starter eval {name}",
        run_name=run,
        description=f"{candidate} judged by {judge}; prompts {run_meta['prompt_versions']}",
        data=items,
        task=task,
        evaluators=[report_scores],
        max_concurrency=max_concurrency,
        metadata=run_meta,
    )
    lf.flush()
    n_scores = sum(len(r.evaluations) for r in result.item_results)
    log.info("langfuse: %s items, %s scores in run %s of %s", len(items), n_scores, run, name)
    return ExportSummary(
        dataset=name,
        run_name=result.run_name,
        items=len(items),
        traces=len(result.item_results),
        scores=n_scores,
        skipped_null_scores=skipped,
        experiment_id=result.experiment_id,
        url=result.experiment_url,
    )
