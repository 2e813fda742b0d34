"""Human renderings of a :class:`~app.eval.records.Report`: the markdown summary written
beside every report, the terminal table's rows, and the self-contained HTML page
(``rag report html``). They only read the typed report; the bad cases, verdicts and
numbers are the report's own, never recomputed here.
"""

from __future__ import annotations

from typing import TypedDict

from app.eval.records import Histogram, Report

__all__ = ["HTML_TEMPLATE", "Bar", "bars", "render_html", "render_markdown", "summary_rows"]


def _fmt(value: object, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


_VERDICT_MARK = {
    "pass": "✅ pass",
    "fail": "❌ FAIL",
    "no_data": "· no data",
    "not_measured": "❌ NOT MEASURED",
}


def not_measured(report: Report) -> list[str]:
    """The gated metrics the run did not measure (``--metrics``); each one fails the run."""
    return [n for n, v in report.verdicts.items() if v.verdict == "not_measured"]


def summary_rows(report: Report) -> list[list[str]]:
    """metric, n, errors, mean, std, 95 % CI, threshold, verdict — one row per metric."""
    rows: list[list[str]] = []
    for name, dist in report.summary.items():
        verdict = report.verdicts.get(name)
        ci = dist.ci95
        rows.append(
            [
                name,
                str(dist.n),
                str(dist.n_errors),
                _fmt(dist.mean),
                _fmt(dist.std),
                f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "—",
                verdict.threshold if verdict else "",
                _VERDICT_MARK[verdict.verdict] if verdict else "",
            ]
        )
    return rows


def render_markdown(report: Report) -> str:
    meta = report.meta
    judge = meta.judge
    totals = report.totals
    lines = [
        f"# Evaluation {report.run_id} — {meta.suite} — {report.status.upper()}",
        "",
        f"- created: {report.created_at}; git {meta.git.sha or '?'}"
        + (" (dirty)" if meta.git.dirty else ""),
        f"- candidate: `{meta.candidate.provider}`"
        + (" (offline baseline — not a model's numbers)" if meta.candidate.offline else ""),
        f"- judge: `{judge.provider}` × {judge.samples} samples"
        + (" (offline reference judge)" if judge.offline else ""),
        "- prompts: " + ", ".join(f"`{p.version}`" for p in meta.prompts.values()),
        "- datasets: "
        + ", ".join(f"{d.name} v{d.version} ({d.sha256[:12]}…)" for d in meta.datasets),
        f"- cases: {totals.cases_done}/{totals.cases_planned}"
        f"; judge errors: {totals.judge_errors}; cost ${totals.cost_usd:.4f}",
    ]
    from app.eval.model_notes import unlisted_note

    if note := unlisted_note(meta):
        lines.append(f"- {note}")
    if report.partial:
        lines.append(f"- **PARTIAL**: {report.partial_reason}")
    for warning in judge.warnings:
        lines.append(f"- ⚠️ {warning}")
    if unmeasured := not_measured(report):
        lines.append(
            "- ❌ gates not measured (left out by --metrics), so the run cannot pass: "
            + ", ".join(unmeasured)
        )
    lines += [
        "",
        "| metric | n | errors | mean | std | 95% CI | threshold | verdict |",
        "|---|---:|---:|---:|---:|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in summary_rows(report)]
    rc = report.refusal_confusion
    lines += [
        "",
        "Refusals (expected × actual): "
        f"refused when expected {rc.true_refusal}, answered when expected {rc.true_answer}, "
        f"missed refusals {rc.missed_refusal}, false refusals {rc.false_refusal}.",
        "",
        f"## Bad cases ({len(report.bad_cases)})",
        "",
    ]
    lines += [
        f"- `{b.id}`: {'; '.join(r.message for r in b.reasons)}" for b in report.bad_cases
    ] or ["none"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- HTML

HTML_TEMPLATE = """<!doctype html>
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
<ul>{% for b in r.bad_cases %}<li><a href="#{{ b.id }}">{{ b.id }}</a>: {% for reason in b.reasons %}<span class="{{ 'fail' if reason.hard else '' }}">{{ reason.message }}</span>{{ '; ' if not loop.last }}{% endfor %}</li>{% else %}<li>none</li>{% endfor %}</ul>
<h2>Cases</h2>
{% for c in r.cases %}<details id="{{ c.id }}"><summary>{{ c.id }} {{ c.tags|join(', ') }}{% if c.red_lines %} <span class="fail">RED LINE {{ c.red_lines|join(', ') }}</span>{% endif %}</summary>
<p><b>Q:</b> {{ c.question }}</p><pre>{{ c.answer }}</pre>
<table><tr><th>metric</th><th>value</th><th>samples</th><th>reason</th></tr>
{% for name, s in c.metrics.items() %}<tr><td>{{ name }}</td><td class="num">{{ fmt(s.value) }}</td><td>{{ s.samples or '' }}</td><td>{{ s.reason or '' }}</td></tr>{% endfor %}
</table>{% for e in c.errors %}<p class="fail">{{ e }}</p>{% endfor %}</details>
{% endfor %}
</body></html>
"""


class Bar(TypedDict):
    height: int
    title: str


def bars(histogram: Histogram | None, max_height: int = 24) -> list[Bar]:
    """One bar per histogram bin, height ∝ count (an empty bin is a 1 px stub), titled
    ``[lo, hi): n`` — the distribution next to the mean (seed 004: not the mean alone)."""
    if histogram is None:
        return []
    edges, counts = histogram.edges, histogram.counts
    top = max(counts, default=0)
    if not top or len(edges) != len(counts) + 1:
        return []
    return [
        Bar(
            height=max(1, round(max_height * n / top)),
            title=f"[{edges[i]:g}, {edges[i + 1]:g}): {n}",
        )
        for i, n in enumerate(counts)
    ]


def render_html(report: Report) -> str:
    import jinja2

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(HTML_TEMPLATE).render(r=report, fmt=lambda v: _fmt(v), bars=bars)
