"""Upload a finished eval report to Langfuse as a dataset run (seed 004 §12.1).

``export_run(report)`` (a typed :class:`~app.eval.report.records.Report`) uses the official
``langfuse`` SDK, version :data:`SDK_REQUIREMENT` (the pyproject extra ``langfuse``; an older
or missing SDK is a :class:`~app.errors.ConfigError`, exit 2, before the run). Its API is
Langfuse v4's: datasets and dataset items over the public REST API, and ``run_experiment`` —
the experiment (dataset) run, whose traces reach the server as OTLP spans carrying the
experiment attributes (``langfuse.experiment.id`` / ``.name`` / ``.dataset.id`` /
``.item.id`` / ``.item.expected_output``) from which the server builds the run's items; the
old ``POST /api/public/dataset-run-items`` is not used (deprecated in Langfuse v4):

* one Langfuse **dataset** per suite version (``rag-starter/<suite>_v<version>``), created
  (upserted) with the dataset file's sha256 in its metadata;
* one **dataset item** per case, with a stable id (uuid5 of dataset name + case id, so a
  re-export updates instead of duplicating): input = question (+ history), expected output
  = golden answer — both from the run's dataset file, read only while its sha256 is still
  the one the report recorded (:func:`golden_cases`) — metadata = case id, tags, difficulty;
* one **trace per case** in the run (``run_name`` = the report's run id): its output is the
  answer the run recorded — nothing is re-generated —, its expected output the item's golden
  answer, and its metadata carries the run's git sha, the prompt version(s), the candidate
  and judge models and the case id; the run's metadata carries the git sha (and dirty flag)
  too — per run, not per item: an item is shared by every run of the dataset;
* one **score per metric** per case (``null`` values are skipped: they are recorded errors,
  not scores), with the judge's reason as the comment.

Credentials come from ``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY`` and ``LANGFUSE_HOST``
(or ``LANGFUSE_BASE_URL``); a missing one is a :class:`~app.errors.ConfigError` that names
it. The harness calls this after writing the report (``rag eval run --langfuse``).
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import ConfigError, DatasetError, ReportError
from app.eval.datasets.case import Case, load_dataset_file
from app.eval.report.records import CaseResult, Report
from app.paths import repo_root

log = logging.getLogger(__name__)

ENV_KEYS = ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST")
# the SDK the export is written and tested against (pyproject: the ``langfuse`` extra)
SDK_REQUIREMENT = "langfuse>=5.0,<6"
SDK_MIN, SDK_BELOW = (5, 0), (6, 0)
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


def require_sdk(installed: str | None = None) -> str:
    """The installed ``langfuse`` version, or a :class:`ConfigError` when it is missing or
    older than :data:`SDK_REQUIREMENT` (the pyproject extra ``langfuse``): the export uses
    the v5 experiment runner (``run_experiment`` + OTLP spans with experiment attributes,
    what Langfuse v4 servers read as experiment runs). ``installed`` overrides the lookup."""
    from importlib.metadata import PackageNotFoundError, version

    hint = f"pip install '{SDK_REQUIREMENT}' (or: pip install -e '.[langfuse]')"
    if installed is None:
        try:
            installed = version("langfuse")
        except PackageNotFoundError:
            raise ConfigError(f"--langfuse needs the Langfuse SDK, not installed: {hint}") from None
    match = re.match(r"(\d+)(?:\.(\d+))?", installed)
    got = (int(match.group(1)), int(match.group(2) or 0)) if match else (0, 0)
    if not SDK_MIN <= got < SDK_BELOW:
        raise ConfigError(
            f"--langfuse needs {SDK_REQUIREMENT}; langfuse {installed} is installed (its "
            f"dataset-run API differs): {hint}"
        )
    return installed


def preflight(env: Mapping[str, str] | None = None) -> None:
    """Before a run: the credentials (:func:`require_env`) and the SDK (:func:`require_sdk`)."""
    require_env(env)
    require_sdk()


def make_client(env: Mapping[str, str] | None = None) -> Any:
    """A ``langfuse.Langfuse`` client from the environment, or a :class:`ConfigError`."""
    public_key, secret_key, host = require_env(env)
    require_sdk()
    from langfuse import Langfuse

    return Langfuse(public_key=public_key, secret_key=secret_key, base_url=host)


def dataset_name(report: Report) -> str:
    if not report.meta.datasets:
        raise ReportError("report has no meta.datasets: cannot name the Langfuse dataset")
    parts = [f"{d.name}_v{d.version}" for d in report.meta.datasets]
    return "rag-starter/" + "+".join(parts)


def item_id(dataset: str, case_id: str) -> str:
    """Stable across exports (re-export upserts); unique across datasets as Langfuse needs."""
    return str(uuid.uuid5(_NAMESPACE, f"{dataset}\x00{case_id}"))


def golden_cases(report: Report) -> dict[str, Case]:
    """The golden cases the run scored, read from its dataset files — only when a file's
    sha256 is still the one the report recorded (an edited file is not the run's ruler)."""
    out: dict[str, Case] = {}
    for ref in report.meta.datasets:
        path = Path(ref.path)
        path = path if path.is_absolute() else repo_root() / path
        try:
            suite = load_dataset_file(path)
        except DatasetError as exc:
            log.warning("langfuse: no golden answers from %s (%s)", path, exc)
            continue
        if suite.sha256 != ref.sha256:
            log.warning(
                "langfuse: %s changed since the run (sha256 %s, the report has %s): "
                "items are exported without golden answers",
                path,
                suite.sha256[:12],
                ref.sha256[:12],
            )
            continue
        out.update((case.id, case) for case in suite.cases)
    return out


def _prompt_versions(report: Report, case: CaseResult | None) -> str:
    if case is not None and case.trace is not None and case.trace.prompt_version:
        return case.trace.prompt_version
    return ", ".join(p.version for _, p in sorted(report.meta.prompts.items()))


def export_run(
    report: Report,
    *,
    client: Any = None,
    run_name: str | None = None,
    max_concurrency: int = 8,
    golden: Mapping[str, Case] | None = None,
) -> ExportSummary:
    """Upload ``report`` as a Langfuse dataset run; see the module docstring.

    ``golden`` (case id → golden :class:`Case`) supplies each item's history and expected
    output; by default it is read from the run's dataset files (:func:`golden_cases`).
    """
    from langfuse import Evaluation

    lf = make_client() if client is None else client
    cases = list(report.cases)
    if not cases:
        raise ReportError("report has no cases to export")
    name = dataset_name(report)
    golden = golden_cases(report) if golden is None else golden
    run = run_name or report.run_id
    ds_meta = {
        "datasets": [d.model_dump(mode="json") for d in report.meta.datasets],
        "source": "rag-starter",
    }
    lf.create_dataset(name=name, description="rag-starter golden cases", metadata=ds_meta)

    by_item: dict[str, CaseResult] = {}
    items = []
    for case in cases:
        iid = item_id(name, case.id)
        by_item[iid] = case
        gold = golden.get(case.id)
        items.append(
            lf.create_dataset_item(
                dataset_name=name,
                id=iid,
                input={
                    "question": case.question,
                    "history": [t.model_dump() for t in gold.history] if gold else [],
                },
                expected_output=gold.golden_answer if gold else None,
                metadata={
                    "case_id": case.id,
                    "tags": list(case.tags),
                    "difficulty": case.difficulty,
                },
            )
        )

    candidate = report.meta.candidate.provider
    judge = report.meta.judge.provider or ""
    git_sha = report.meta.git.sha or "unknown"
    run_meta = {
        "run_id": report.run_id,
        "git_sha": git_sha,
        "git_dirty": str(report.meta.git.dirty).lower(),
        "candidate": candidate,
        "judge": judge,
        "prompt_versions": _prompt_versions(report, None),
    }
    skipped = 0

    def task(*, item: Any, **_: Any) -> Any:
        case = by_item[item.id]
        lf.update_current_span(
            metadata={
                "case_id": case.id,
                "git_sha": git_sha,
                "prompt_version": _prompt_versions(report, case),
                "candidate": candidate,
                "judge": judge,
            }
        )
        return case.answer

    by_id = {case.id: case for case in cases}

    def report_scores(*, metadata: Any = None, **_: Any) -> list[Any]:
        nonlocal skipped
        case = by_id[str((metadata or {}).get("case_id"))]
        out = []
        for metric, score in sorted(case.metrics.items()):
            if score.value is None:
                skipped += 1
                continue
            out.append(
                Evaluation(
                    name=metric, value=score.value, comment=score.reason, data_type="NUMERIC"
                )
            )
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
