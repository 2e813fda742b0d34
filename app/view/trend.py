"""The trend page: each metric's mean and 95 % CI over the runs in a folder (the nightly
archive), per suite, the points coloured by the prompt versions the run used. The CI is
the report's own (``summary[metric].ci95``); nothing is recomputed here. Drawn as inline
SVG (a band for the CI, a line through the means) with the numbers in a table below.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from markupsafe import Markup, escape

from app.view.model import RunEntry

__all__ = ["trend_page"]

PALETTE = ["#1a73e8", "#d93025", "#188038", "#e37400", "#9334e6", "#007b83", "#b06000"]
W, H, PAD = 1100, 170, 36


def _svg(points: Sequence[dict[str, Any]], colours: dict[str, str]) -> Markup:
    values: list[float] = [
        float(v) for p in points for v in (p["mean"], *(p["ci"] or ())) if v is not None
    ]
    if not values:
        return Markup('<p class="nodata">no data</p>')
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    n = len(points)

    def x(i: int) -> float:
        return PAD + (W - 2 * PAD) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return H - PAD / 2 - (H - PAD) * (v - lo) / (hi - lo)

    band_top = [(x(i), y(p["ci"][1])) for i, p in enumerate(points) if p["ci"]]
    band_bot = [(x(i), y(p["ci"][0])) for i, p in enumerate(points) if p["ci"]]
    parts = [f'<svg class="trend" role="img" viewBox="0 0 {W} {H}" width="100%" height="{H}">']
    parts.append(f'<text x="2" y="{y(hi) + 4:.1f}" font-size="11">{hi:.3g}</text>')
    parts.append(f'<text x="2" y="{y(lo) + 4:.1f}" font-size="11">{lo:.3g}</text>')
    if len(band_top) > 1:
        poly = " ".join(f"{a:.1f},{b:.1f}" for a, b in band_top + band_bot[::-1])
        parts.append(f'<polygon points="{poly}" fill="#1a73e8" fill-opacity="0.15"/>')
    line = [(x(i), y(p["mean"])) for i, p in enumerate(points) if p["mean"] is not None]
    if len(line) > 1:
        pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in line)
        parts.append(f'<polyline points="{pts}" fill="none" stroke="#5f6368" stroke-width="1.5"/>')
    for i, p in enumerate(points):
        if p["ci"]:
            parts.append(
                f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(p["ci"][0]):.1f}" '
                f'y2="{y(p["ci"][1]):.1f}" stroke="{colours[p["prompts"]]}" stroke-opacity="0.6"/>'
            )
        if p["mean"] is not None:
            title = escape(f"{p['run']} · {p['prompts']} · mean {p['mean']:.3f}")
            parts.append(
                f'<circle cx="{x(i):.1f}" cy="{y(p["mean"]):.1f}" r="4" '
                f'fill="{colours[p["prompts"]]}"><title>{title}</title></circle>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def trend_data(entries: Sequence[RunEntry]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """suite → metric → one point per run (oldest first)."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    runs = sorted((e for e in entries if e.report), key=lambda e: e.created_at)
    for entry in runs:
        r = entry.report
        assert r is not None
        prompts = ", ".join(p.version for p in r.meta.prompts.values()) or "no prompt"
        for name, dist in r.summary.items():
            out[r.meta.suite][name].append(
                {
                    "run": entry.key,
                    "date": r.created_at,
                    "prompts": prompts,
                    "mean": dist.mean,
                    "ci": list(dist.ci95) if dist.ci95 else None,
                    "n": dist.n,
                    "offline": r.offline,
                }
            )
    return out


def trend_page(
    entries: Sequence[RunEntry], run_href: Callable[[str], str], home: str | None = None
) -> str:
    from app.view.pages import _render

    data = trend_data(entries)
    labels = sorted({p["prompts"] for metrics in data.values() for pts in metrics.values() for p in pts})  # fmt: skip
    colours = {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}
    suites = [
        {
            "name": suite,
            "metrics": [
                {"name": m, "svg": _svg(pts, colours), "points": pts}
                for m, pts in sorted(metrics.items())
            ],
        }
        for suite, metrics in sorted(data.items())
    ]
    return _render(
        "trend.html", lang="en", home=home, suites=suites, colours=colours, run_href=run_href
    )
