"""``rag report``: render a JSON evaluation report as HTML (jinja2) or markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Evaluation {{ r.run_id }} — {{ r.meta.suite }}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;max-width:1200px}
table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.25rem .5rem}
th{background:#f4f4f4}td.num{text-align:right}.fail{color:#b00020;font-weight:bold}
.pass{color:#137333}.warn{background:#fff4d6;padding:.5rem}details{margin:.25rem 0}
pre{white-space:pre-wrap;background:#f8f8f8;padding:.5rem}
.hist{white-space:nowrap;vertical-align:bottom}.hist span{display:inline-block;width:7px;margin-right:1px;background:#5b8def;vertical-align:bottom}
</style></head><body>
<h1>Evaluation {{ r.run_id }} — {{ r.meta.suite }} — <span class="{{ 'pass' if r.status == 'pass' else 'fail' }}">{{ r.status|upper }}</span></h1>
<ul>
<li>created {{ r.created_at }} · git {{ r.meta.git.sha or '?' }}{% if r.meta.git.dirty %} (dirty){% endif %}</li>
<li>candidate <code>{{ r.meta.candidate.provider }}</code>{% if r.meta.candidate.offline %} — offline baseline, not a model's numbers{% endif %}</li>
<li>judge <code>{{ r.meta.judge.provider }}</code> × {{ r.meta.judge.samples }}{% for p in r.meta.judge.prompts.values() %} · <code>{{ p.version }}</code>{% endfor %}</li>
<li>prompts {% for p in r.meta.prompts.values() %}<code>{{ p.version }}</code> {% endfor %}</li>
<li>datasets {% for d in r.meta.datasets %}{{ d.name }} v{{ d.version }} <small>{{ d.sha256[:12] }}</small> {% endfor %}</li>
<li>cases {{ r.totals.cases_done }}/{{ r.totals.cases_planned }} · judge errors {{ r.totals.judge_errors }} · cost ${{ '%.4f'|format(r.totals.cost_usd) }}</li>
</ul>
{% if r.partial %}<p class="warn">PARTIAL: {{ r.partial_reason }}</p>{% endif %}
{% for w in r.meta.judge.warnings %}<p class="warn">⚠ {{ w }}</p>{% endfor %}
<h2>Metrics</h2>
<table><tr><th>metric</th><th>n</th><th>errors</th><th>mean</th><th>std</th><th>min</th><th>p10</th><th>median</th><th>p90</th><th>max</th><th>95% CI</th><th>distribution</th><th>threshold</th><th>verdict</th></tr>
{% for name, d in r.summary.items() %}{% set v = r.verdicts.get(name) %}
<tr><td>{{ name }}</td><td class="num">{{ d.n }}</td><td class="num">{{ d.n_errors }}</td>
{% for key in ['mean','std','min','p10','median','p90','max'] %}<td class="num">{{ fmt(d[key]) }}</td>{% endfor %}
<td>{% if d.ci95 %}[{{ fmt(d.ci95[0]) }}, {{ fmt(d.ci95[1]) }}]{% else %}—{% endif %}</td>
<td class="hist">{% for bar in bars(d.histogram) %}<span style="height:{{ bar.height }}px" title="{{ bar.title }}"></span>{% endfor %}</td>
<td>{{ v.threshold if v else '' }}</td><td class="{{ v.verdict if v else '' }}">{{ v.verdict if v else '' }}</td></tr>
{% endfor %}</table>
<h2>Refusals</h2>
<table><tr><th></th><th>refused</th><th>answered</th></tr>
<tr><th>should refuse</th><td class="num">{{ r.refusal_confusion.true_refusal }}</td><td class="num">{{ r.refusal_confusion.missed_refusal }}</td></tr>
<tr><th>should answer</th><td class="num">{{ r.refusal_confusion.false_refusal }}</td><td class="num">{{ r.refusal_confusion.true_answer }}</td></tr></table>
<h2>By tag</h2>
<table><tr><th>tag</th><th>cases</th>{% for name in r.summary %}<th>{{ name }}</th>{% endfor %}</tr>
{% for tag, b in r.breakdowns.by_tag.items() %}<tr><td>{{ tag }}</td><td class="num">{{ b.cases }}</td>{% for name in r.summary %}<td class="num">{{ fmt(b.metrics[name].mean) if name in b.metrics else '' }}</td>{% endfor %}</tr>{% endfor %}
</table>
<h2>Bad cases ({{ r.bad_cases|length }})</h2>
<ul>{% for b in r.bad_cases %}<li><a href="#{{ b.id }}">{{ b.id }}</a>: {{ b.reasons|join('; ') }}</li>{% else %}<li>none</li>{% endfor %}</ul>
<h2>Cases</h2>
{% for c in r.cases %}<details id="{{ c.id }}"><summary>{{ c.id }} {{ c.tags|join(', ') }}{% if c.red_lines %} <span class="fail">RED LINE {{ c.red_lines|join(', ') }}</span>{% endif %}</summary>
<p><b>Q:</b> {{ c.question }}</p><pre>{{ c.answer }}</pre>
<table><tr><th>metric</th><th>value</th><th>samples</th><th>reason</th></tr>
{% for name, s in c.metrics.items() %}<tr><td>{{ name }}</td><td class="num">{{ fmt(s.value) }}</td><td>{{ s.samples or '' }}</td><td>{{ s.reason or '' }}</td></tr>{% endfor %}
</table>{% for e in c.errors %}<p class="fail">{{ e }}</p>{% endfor %}</details>
{% endfor %}
</body></html>
"""


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _bars(histogram: Any, max_height: int = 24) -> list[dict[str, Any]]:
    """One bar per histogram bin, height ∝ count (an empty bin is a 1 px stub), titled
    ``[lo, hi): n`` — the distribution next to the mean (seed 004: not the mean alone)."""
    if not isinstance(histogram, dict):
        return []
    edges, counts = histogram.get("edges") or [], histogram.get("counts") or []
    top = max(counts, default=0)
    if not top or len(edges) != len(counts) + 1:
        return []
    return [
        {
            "height": max(1, round(max_height * n / top)),
            "title": f"[{edges[i]:g}, {edges[i + 1]:g}): {n}",
        }
        for i, n in enumerate(counts)
    ]


def render_html(report: dict[str, Any]) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(_TEMPLATE).render(r=report, fmt=_fmt, bars=_bars)


@click.group()
def cli() -> None:
    """Render a JSON evaluation report as HTML or markdown."""


@cli.command("html")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Default: REPORT with .html.",
)
def html_cmd(report: Path, output: Path | None) -> None:
    """Write REPORT as a self-contained HTML page."""
    from app.eval.report import atomic_write_text, load_report, validate_report

    data = load_report(report)
    validate_report(data)
    out = output or report.with_suffix(".html")
    atomic_write_text(out, render_html(data))
    click.echo(str(out))


@cli.command("md")
@click.argument("report", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def md_cmd(report: Path) -> None:
    """Print REPORT's markdown summary."""
    from app.eval.report import load_report, render_markdown, validate_report

    data = load_report(report)
    validate_report(data)
    click.echo(render_markdown(data), nl=False)
