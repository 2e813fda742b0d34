"""Recorded baselines: the report behind each prompt version's ``评测基线`` header line.

``rag eval baseline REPORT --prompt system/kb_qa_v2`` writes
``reports/baselines/system/kb_qa_v2.json``::

    {"prompt": "system/kb_qa_v2", "prompt_hash": "sha256:…",
     "suites": {"smoke": {"run_id": …, "report": "reports/eval_….json", "recorded_at": …,
                          "dataset": {"name", "version", "sha256"}, "candidate": {…},
                          "judge": {…}, "offline": true, "metrics": {"faithfulness": 4.35, …}}}}

:func:`check_header_baselines` is what ``rag prompts check`` calls: every header baseline
line must be backed by a recorded baseline of the same suite whose metric means, rounded
to the header's two decimals, equal the header's numbers (seed 004 §3: "CI 会自动比对").

A baseline is a real model's numbers (seed 004: 禁止造假): a run whose candidate or judge is
an offline baseline (``offline:*``, which never reads the prompt) or that used a model
outside the prompt's ``APPLICABLE_MODELS`` (``--allow-unlisted-model``) is refused by
:func:`record_baseline`, and a header line backed by such a recorded run is rejected (P026).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.errors import ReportError
from app.generation.registry.rules import Violation
from app.paths import repo_root
from app.text import normalise

# Header metric spellings → report metric names.
METRIC_ALIASES: dict[str, str] = {
    "answer_relevance": "relevance",
    "hit": "hit_rate",
    "hit_rate@5": "hit_rate",
    "hit@5": "hit_rate",
    "recall@5": "recall",
    "ndcg@5": "ndcg",
    "refusal_error_rate": "refusal_error",
    "acl_leak_rate": "acl_leak",
}
TOLERANCE = 0.005 + 1e-9  # header numbers carry two decimals


def suite_key(text: str) -> str:
    """``smoke set`` / ``smoke集`` / ``Smoke suite`` → ``smoke`` (header spellings)."""
    key = normalise(text)  # NFKC, case-folded, spaces collapsed (app.text.normalise)
    for suffix in (" set", " suite", "评测集", "集"):
        key = key.removesuffix(suffix).strip()
    return key


def default_baselines_dir() -> Path:
    return repo_root() / "reports" / "baselines"


def baseline_path(qualified: str, root: Path | None = None) -> Path:
    category, _, rest = qualified.partition("/")
    return (root or default_baselines_dir()) / category / f"{rest}.json"


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ReportError(f"{path}: unreadable baseline ({exc})") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: a baseline file must hold a JSON object")
    return data


def record_baseline(
    report_path: Path, prompt: str, *, root: Path | None = None, qualified: str | None = None
) -> Path:
    """Record ``report_path`` as the baseline of ``prompt`` for the report's suite.

    ``prompt`` may be qualified (``system/kb_qa_v2``) or a prompt id; the report must have
    run that version (its ``meta.prompts`` says so), be complete and schema-valid.
    """
    # imported here: `rag prompts check` (check_header_baselines) needs none of the report
    # and statistics code (numpy, the report models)
    from app.eval.report.io import load_report
    from app.safe_io import atomic_write_text

    report = load_report(report_path)
    if report.partial:
        raise ReportError(f"{report_path} is a partial report: record a complete run")
    prompts = report.meta.prompts
    version = qualified
    prompt_hash: str | None = None
    if version is None:
        matches = [p for pid, p in prompts.items() if prompt in (pid, p.version)]
        if not matches:
            raise ReportError(
                f"{report_path} did not run prompt {prompt!r}; it ran: "
                + ", ".join(p.version for p in prompts.values())
            )
        version = matches[0].version
        prompt_hash = matches[0].hash
    else:
        prompt_hash = next((p.hash for p in prompts.values() if p.version == version), None)
    why = not_a_model_baseline(
        {
            "candidate": report.meta.candidate.model_dump(),
            "judge": {"provider": report.meta.judge.provider, "offline": report.meta.judge.offline},
            "unlisted_models": list(report.meta.unlisted_models),
        }
    )
    if why is not None:
        raise ReportError(
            f"{report_path} cannot be a prompt's 评测基线: {why}. A baseline is a real model's "
            f"numbers: run `rag eval run --suite {report.meta.suite} --prompt {version} --model "
            "<a model in its APPLICABLE_MODELS> --judge <a stronger model>` and record that report."
        )
    path = baseline_path(version, root)
    data: dict[str, Any] = _load(path) if path.exists() else {"prompt": version, "suites": {}}
    data["prompt"] = version
    data["prompt_hash"] = prompt_hash
    meta = report.meta
    dataset = meta.datasets[0] if meta.datasets else None
    try:
        shown = str(report_path.resolve().relative_to(repo_root()))
    except ValueError:
        shown = str(report_path)
    data["suites"][meta.suite] = {
        "run_id": report.run_id,
        "report": shown,
        "recorded_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "created_at": report.created_at,
        "dataset": {
            "name": dataset.name if dataset else None,
            "version": dataset.version if dataset else None,
            "sha256": dataset.sha256 if dataset else None,
        },
        "candidate": meta.candidate.model_dump(),
        "judge": {
            "provider": meta.judge.provider,
            "offline": meta.judge.offline,
            "samples": meta.judge.samples,
        },
        "offline": meta.candidate.offline,
        "unlisted_models": [dict(p) for p in meta.unlisted_models],
        "metrics": {name: dist.mean for name, dist in report.summary.items()},
    }
    atomic_write_text(path, json.dumps(data, ensure_ascii=False, indent=1, allow_nan=False) + "\n")
    return path


def not_a_model_baseline(recorded: dict[str, Any]) -> str | None:
    """Why a run (its recorded ``candidate``, ``judge`` and ``unlisted_models``) is not a real
    model's baseline, or ``None``."""
    cand = recorded.get("candidate") or {}
    judge = recorded.get("judge") or {}
    if cand.get("offline") or recorded.get("offline"):
        return (
            f"its candidate {cand.get('provider', 'offline:*')} is an offline baseline (it never "
            "reads the prompt: no model ran)"
        )
    if judge.get("offline"):
        return f"its judge {judge.get('provider')} is an offline heuristic (no model judged)"
    unlisted = recorded.get("unlisted_models") or []
    if unlisted:
        models = ", ".join(sorted({str(p.get("model")) for p in unlisted if isinstance(p, dict)}))
        return f"it ran with --allow-unlisted-model ({models} outside APPLICABLE_MODELS)"
    return None


def check_header_baselines(registry: Any, baselines_dir: Path | None = None) -> list[Violation]:
    """Violations for header baseline lines that no recorded baseline backs.

    ``registry`` is an :class:`app.generation.registry.PromptRegistry` (its ``modules``
    carry the parsed header, the file and the line of each baseline).
    """
    root = baselines_dir if baselines_dir is not None else default_baselines_dir()
    out: list[Violation] = []
    for mod in registry.modules:
        header = getattr(mod, "header", None)
        spec = getattr(mod, "spec", None)
        if header is None or spec is None:
            continue
        qualified = spec.qualified
        for line in header.baselines:
            path = baseline_path(qualified, root)
            suites = _load(path)["suites"] if path.exists() else {}
            recorded = suites.get(suite_key(line.suite))
            if recorded is None:
                out.append(
                    Violation(
                        "P026",
                        mod.rel,
                        line.line,
                        f"{qualified} claims a {line.suite} baseline but none is recorded "
                        f"in {path}",
                    )
                )
                continue
            why = not_a_model_baseline(recorded)
            if why is not None:
                out.append(
                    Violation(
                        "P026",
                        mod.rel,
                        line.line,
                        f"{qualified} claims a {line.suite} baseline, but the recorded run "
                        f"{recorded.get('run_id')} is not a model's: {why}",
                    )
                )
                continue
            for metric, claimed in line.metrics:
                name = METRIC_ALIASES.get(metric.lower(), metric.lower())
                actual = recorded["metrics"].get(name)
                if actual is None or abs(float(actual) - float(claimed)) > TOLERANCE:
                    shown = "nothing" if actual is None else f"{actual:.4f}"
                    out.append(
                        Violation(
                            "P027",
                            mod.rel,
                            line.line,
                            f"{qualified} header says {line.suite} {metric}={claimed:g}, the "
                            f"recorded run {recorded['run_id']} has {shown}",
                        )
                    )
    return out
