"""The trend page: each metric's mean and 95 % CI over the runs in a folder (the nightly
archive), per suite, one line per candidate model, the runs placed on a time axis by their
date. The CI is the report's own (``summary[metric].ci95``); nothing is recomputed here.
Drawn as inline SVG (a line through the means, a bar for each CI) with the numbers in a
table below, and a filter (candidate model, suite, metric) in the page.

Only whole runs are drawn: a shard's report (``meta.shard``: one part of a sharded run,
whose merged report is the run) is left out and counted, so a nightly's four shard partials
never stand beside its merged run as four more runs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup, escape

from app.view.model import RunEntry

__all__ = ["trend_data", "trend_page"]

PALETTE = ["#1a73e8", "#d93025", "#188038", "#e37400", "#9334e6", "#007b83", "#b06000"]
W, H, PAD, AXIS = 1100, 190, 40, 22  # AXIS: the date labels' band under the plot


@dataclass
class Trend:
    """suite → metric → candidate model → one point per run, oldest first."""

    series: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    )
    shards_left_out: list[str] = field(default_factory=list)

    @property
    def models(self) -> list[str]:
        return sorted({m for metrics in self.series.values() for s in metrics.values() for m in s})


def _when(created_at: str) -> datetime:
    try:
        moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def trend_data(entries: Sequence[RunEntry]) -> Trend:
    trend = Trend()
    runs = sorted((e for e in entries if e.summary), key=lambda e: _when(e.created_at))
    for entry in runs:
        r = entry.summary
        assert r is not None
        if r.meta.shard is not None:
            trend.shards_left_out.append(entry.key)
            continue
        prompts = ", ".join(p.version for p in r.meta.prompts.values()) or "no prompt"
        model = r.meta.candidate.provider
        for name, dist in r.summary.items():
            trend.series[r.meta.suite][name][model].append(
                {
                    "run": entry.key,
                    "date": r.created_at,
                    "when": _when(r.created_at).timestamp(),
                    "model": model,
                    "prompts": prompts,
                    "mean": dist.mean,
                    "ci": list(dist.ci95) if dist.ci95 else None,
                    "n": dist.n,
                    "offline": r.offline,
                    "merged": len(r.meta.merged_from),
                    "partial": r.partial,
                }
            )
    return trend


def _ticks(times: Sequence[float], most: int = 8) -> list[float]:
    """Where the date labels go: at each run when there are few, else evenly spaced."""
    unique = sorted(set(times))
    if len(unique) <= most:
        return unique
    t0, t1 = unique[0], unique[-1]
    return [t0 + (t1 - t0) * i / (most - 1) for i in range(most)]


def _label(t: float, span: float) -> str:
    moment = datetime.fromtimestamp(t, UTC)
    return moment.strftime("%Y-%m-%d" if span >= 86400 else "%Y-%m-%d %H:%M")


def _svg(by_model: dict[str, list[dict[str, Any]]], colours: dict[str, str]) -> Markup:
    points = [p for pts in by_model.values() for p in pts]
    values: list[float] = [
        float(v) for p in points for v in (p["mean"], *(p["ci"] or ())) if v is not None
    ]
    if not values:
        return Markup('<p class="nodata">no data</p>')
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    t0, t1 = min(p["when"] for p in points), max(p["when"] for p in points)
    plot_bottom = H - AXIS

    def x(t: float) -> float:
        return PAD + (W - 2 * PAD) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.5)

    def y(v: float) -> float:
        return plot_bottom - PAD / 4 - (plot_bottom - PAD / 2) * (v - lo) / (hi - lo)

    parts = [f'<svg class="trend" role="img" viewBox="0 0 {W} {H}" width="100%" height="{H}">']
    parts.append(f'<text x="2" y="{y(hi) + 4:.1f}" font-size="11">{hi:.3g}</text>')
    parts.append(f'<text x="2" y="{y(lo) + 4:.1f}" font-size="11">{lo:.3g}</text>')
    parts.append(
        f'<line x1="{PAD}" x2="{W - PAD}" y1="{plot_bottom:.1f}" y2="{plot_bottom:.1f}" '
        'stroke="#9aa0a6"/>'
    )
    shown: set[str] = set()
    for t in _ticks([p["when"] for p in points]):
        label = _label(t, t1 - t0)
        if label in shown:  # two runs on one day: one label
            continue
        shown.add(label)
        parts.append(
            f'<text class="date" x="{x(t):.1f}" y="{H - 6}" font-size="11" '
            f'text-anchor="middle">{label}</text>'
        )
    for model, pts in sorted(by_model.items()):
        colour = colours[model]
        parts.append(f'<g class="series" data-model="{escape(model)}">')
        line = [(x(p["when"]), y(p["mean"])) for p in pts if p["mean"] is not None]
        if len(line) > 1:
            coords = " ".join(f"{a:.1f},{b:.1f}" for a, b in line)
            parts.append(
                f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="1.5"/>'
            )
        for p in pts:
            if p["ci"]:
                parts.append(
                    f'<line x1="{x(p["when"]):.1f}" x2="{x(p["when"]):.1f}" '
                    f'y1="{y(p["ci"][0]):.1f}" y2="{y(p["ci"][1]):.1f}" stroke="{colour}" '
                    'stroke-opacity="0.5" stroke-width="3"/>'
                )
            if p["mean"] is not None:
                title = escape(
                    f"{p['date']} · {model} · {p['prompts']} · mean {p['mean']:.3f} · {p['run']}"
                )
                parts.append(
                    f'<circle cx="{x(p["when"]):.1f}" cy="{y(p["mean"]):.1f}" r="4" '
                    f'fill="{colour}"><title>{title}</title></circle>'
                )
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))


def trend_page(
    entries: Sequence[RunEntry], run_href: Callable[[str], str], home: str | None = None
) -> str:
    from app.view.pages import _render

    data = trend_data(entries)
    colours = {model: PALETTE[i % len(PALETTE)] for i, model in enumerate(data.models)}
    suites: list[dict[str, Any]] = []
    for suite, metrics in sorted(data.series.items()):
        drawn: list[dict[str, Any]] = []
        for metric, by_model in sorted(metrics.items()):
            points = sorted((p for pts in by_model.values() for p in pts), key=lambda p: p["when"])
            drawn.append({"name": metric, "svg": _svg(by_model, colours), "points": points})
        suites.append({"name": suite, "metrics": drawn})
    return _render(
        "trend.html",
        lang="en",
        home=home,
        suites=suites,
        colours=colours,
        run_href=run_href,
        shards_left_out=data.shards_left_out,
    )
