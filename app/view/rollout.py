"""The viewer's ``/rollout`` page: every staged rollout of a prompts tree — its stage on the
plan, since when, what the next step needs (why a promotion would be refused now) — and, with
an answer log, the A/B of its arms (``rag ops ab``'s table) and the 👎 rate per arm at every
hourly look. Prompts with more than one version and no rollout show their active and
fallback version, so an abort or a rollback shows here too."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from markupsafe import Markup, escape

from app.errors import ConfigError, RagError
from app.eval.compare.live import METRICS, Look, compare_arms, stage_evidence
from app.eval.compare.table import LABEL, SYMBOL
from app.generation.registry import build_registry
from app.generation.registry.rollout import assess, plan_of
from app.ops.logs import AnswerLog, read_answer_log

W, H, PAD = 900, 160, 40
COLOURS = {"control": "#5f6368", "candidate": "#d93025"}


def _svg(looks: Sequence[Look]) -> Markup:
    """👎 rate per arm over the hourly looks: two polylines."""
    series = {
        arm: [(i, look.thumbs_down_rate[arm]) for i, look in enumerate(looks)]
        for arm in ("control", "candidate")
    }
    values = [v for pts in series.values() for _, v in pts if v is not None]
    if not values or len(looks) < 2:
        return Markup('<p class="nodata">not enough looks for a trend</p>')
    lo, hi = 0.0, max(values) * 1.1 or 1.0
    n = len(looks)

    def x(i: int) -> float:
        return PAD + (W - 2 * PAD) * i / (n - 1)

    def y(v: float) -> float:
        return H - PAD / 2 - (H - PAD) * (v - lo) / (hi - lo)

    parts = [
        f'<svg class="trend" id="ab-trend" role="img" viewBox="0 0 {W} {H}" width="100%" height="{H}">'
    ]
    parts.append(f'<text x="2" y="{y(hi) + 4:.1f}" font-size="11">{hi * 100:.1f} %</text>')
    parts.append(f'<text x="2" y="{y(lo) + 4:.1f}" font-size="11">0 %</text>')
    for arm, pts in series.items():
        line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in pts if v is not None)
        parts.append(
            f'<polyline class="arm-{arm}" points="{line}" fill="none" '
            f'stroke="{COLOURS[arm]}" stroke-width="2"><title>{arm}</title></polyline>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v * 100:.2f} %"


def _val(v: float | None, unit: str, signed: bool = False) -> str:
    if v is None:
        return "–"
    sign = "+" if signed else ""
    if unit == "%":
        return f"{v * 100:{sign}.2f} {'pp' if signed else '%'}"
    if unit == "$":
        return f"{v:{sign}.5f} $"
    return f"{v:{sign}.0f} {unit}"


def rollout_rows(prompts_root: Path, log: AnswerLog | None, now: datetime) -> dict[str, Any]:
    reg = build_registry(prompts_root)
    try:
        plan = plan_of(reg.releases)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    rollouts: list[dict[str, Any]] = []
    steady: list[dict[str, str]] = []
    for pid in reg.prompt_ids():
        rel = reg.release(pid)
        if rel is None:
            continue
        rollout = rel.rollout
        if rollout is None:
            if len(reg.versions(pid)) > 1:
                steady.append(
                    {"prompt": pid, "active": f"v{rel.active}", "fallback": f"v{rel.fallback}"}
                )
            continue
        evidence = stage_evidence(reg.releases, rel, log, now)
        step = assess(plan, rollout, now, evidence)
        ab: dict[str, Any] | None = None
        problem: str | None = None
        if log is not None and step.stage.evidence == "answers":
            try:
                served = [a.when for a in log.answers if a.arm_of(pid) is not None]
                span = (max(served) - min(served)) if served else timedelta(0)
                hourly = span >= timedelta(hours=3)  # a shorter window: every 10 minutes
                cmp = compare_arms(
                    log,
                    pid,
                    candidate=f"{pid}_v{rollout.candidate}",
                    look_every=timedelta(hours=1) if hourly else timedelta(minutes=10),
                )
            except RagError as exc:
                problem = str(exc)
            else:
                units = {m.key: m.unit for m in METRICS}
                ab = {
                    "arms": cmp.arms,
                    "rows": [
                        {
                            "label": m.label,
                            "control": m.control,
                            "candidate": m.candidate,
                            "unit": units[m.metric],
                            "interval": m.interval,
                            "symbol": SYMBOL[m.verdict],
                            "verdict": LABEL[m.verdict],
                            "key": m.metric,
                        }
                        for m in cmp.metrics
                    ],
                    "svg": _svg(cmp.looks),
                    "looks": cmp.looks,
                    "window": f"{cmp.start} … {cmp.end}",
                }
        rollouts.append(
            {
                "prompt": pid,
                "active": f"v{rel.active}",
                "fallback": f"v{rel.fallback}",
                "candidate": f"v{rollout.candidate}",
                "stage": step.stage,
                "index": step.index,
                "since": rollout.since,
                "elapsed_min": round(step.elapsed.total_seconds() / 60),
                "ready": step.ready,
                "missing": step.missing,
                "next": step.next_stage.name if step.next_stage else "active",
                "ab": ab,
                "problem": problem,
            }
        )
    return {"plan": plan, "rollouts": rollouts, "steady": steady}


def rollout_page(
    prompts_root: Path, log_path: Path | None, home: str = "/", now: datetime | None = None
) -> str:
    from app.view.pages import _render

    log = read_answer_log(log_path) if log_path is not None and log_path.is_file() else None
    data = rollout_rows(prompts_root, log, now or datetime.now(UTC))
    return _render(
        "rollout.html",
        home=home,
        lang="en",
        root=str(prompts_root),
        log=str(log_path) if log_path is not None else None,
        log_found=log is not None,
        pct=_pct,
        val=_val,
        esc=escape,
        **data,
    )
