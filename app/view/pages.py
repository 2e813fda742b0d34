"""The viewer's HTML pages, rendered with Jinja2 (autoescape on: a case's text is always
text) from the templates beside this module; CSS and JS are inlined so a page served or
exported alone works. The case tables carry compact rows as JSON (``<`` escaped; the
static export reads them from script files) that ``static/view.js`` filters, sorts and
pages — 50 rows in the DOM at a time. A run's case page is drawn in the browser by
``static/case.js`` from the case's JSON (:mod:`app.view.casedata`), here embedded in the
page, in the static export read from a data file — one renderer for both.

Every function takes the links it needs, so the same page serves ``rag view`` (URLs) and
the static export (relative file names).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup

from app.eval.report.outcome import LABELS
from app.eval.report.records import CaseResult, Report, ReportSummary
from app.eval.report.render import _VERDICT_MARK, bars, cost_text
from app.eval.report.status import status_line
from app.text import has_cjk
from app.view.casedata import Extras, RowFacts, case_row, priced, run_info
from app.view.diff import word_diff
from app.view.model import RunEntry, _direction, compare_rows, fmt_num, run_row

if TYPE_CHECKING:
    from app.eval.compare import Comparison

__all__ = [
    "case_page",
    "case_shell",
    "compare_case_page",
    "compare_page",
    "run_page",
    "run_page_of",
    "runs_page",
    "static_assets",
]

HERE = Path(__file__).parent
VERDICT_LABEL = _VERDICT_MARK  # the terminal table's words: pass / FAIL / no data / NOT MEASURED


@cache
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        css=Markup((HERE / "static" / "view.css").read_text(encoding="utf-8")),
        js=Markup((HERE / "static" / "view.js").read_text(encoding="utf-8")),
        case_js=Markup((HERE / "static" / "case.js").read_text(encoding="utf-8")),
        fmt=fmt_num,
        bars=bars,
        verdict_label=VERDICT_LABEL,
        home=None,
        trend=None,
        assets=None,  # a folder href: link view.css / view.js there instead of inlining them
    )
    return env


def static_assets() -> dict[str, str]:
    """``view.css``, ``view.js`` and ``case.js`` by file name (what a page links when
    ``assets`` is set)."""
    names = ("view.css", "view.js", "case.js")
    return {n: (HERE / "static" / n).read_text(encoding="utf-8") for n in names}


def json_script(data: object) -> Markup:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&``."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _render(name: str, **context: Any) -> str:
    return _env().get_template(name).render(**context)


def _lang(texts: Sequence[str]) -> str:
    return "zh" if any(has_cjk(t) for t in texts[:50]) else "en"


def _tags(report: Report) -> tuple[list[str], list[str]]:  # the compare page's filters
    tags = sorted({t for c in report.cases for t in c.tags})
    diffs = sorted({c.difficulty or "unspecified" for c in report.cases})
    return tags, diffs


# ---------------------------------------------------------------- pages


def runs_page(
    entries: Sequence[RunEntry],
    folder: str,
    run_href: Mapping[str, str],
    compare_prefix: str,
    trend: str | None = None,
) -> str:
    rows = []
    for entry in entries:
        row = run_row(entry)
        row["href"] = run_href.get(entry.key, "")
        rows.append(row)
    return _render(
        "runs.html", lang="en", folder=folder, runs=rows, compare_prefix=compare_prefix,
        trend=trend,
    )  # fmt: skip


def run_page(report: Report, case_href: Mapping[str, str], home: str | None = None) -> str:
    """``rag view``'s run page of a typed report, its rows embedded."""
    bad = {b.id: b for b in report.bad_cases}
    rows = [case_row(c, c.trace, case_href[c.id], bad.get(c.id), report.metrics) for c in report.cases]  # fmt: skip
    return run_page_of(report, rows, home=home)


def run_page_of(
    summary: ReportSummary,
    rows: Sequence[Mapping[str, Any]],
    home: str | None = None,
    rows_src: Sequence[str] = (),
    facts: RowFacts | None = None,
    rows_url: str | None = None,
) -> str:
    """The run page: summary, verdicts, distributions, and the case table over ``rows``
    (:func:`app.view.casedata.case_row`) — embedded; or read from the scripts ``rows_src``
    (the static export: the page does not inline 10,000 rows); or asked page by page from
    ``rows_url`` (``rag view``: filtered, sorted and paged by the server,
    :mod:`app.view.index`). ``facts``: the rows' tags, difficulties, language and number
    when ``rows`` is not given (:class:`app.view.casedata.RowFacts`)."""
    facts = facts or RowFacts.of(rows)
    spec: dict[str, Any] = {"kind": "run", "metrics": list(summary.metrics), "priced": priced(summary), "page": 50}  # fmt: skip
    if rows_src:
        spec["total"] = facts.total
    if rows_url:
        spec["rows_url"] = rows_url
        spec["total"] = facts.total
    # the outcome classes (a report written before them has none: no filter, no column)
    outcomes = [(o, LABELS.get(o, o), n) for o, n in summary.outcomes.items()]
    if outcomes:
        spec["outcomes"] = {o: label for o, label, _ in outcomes}
    return _render(
        "run.html",
        lang=facts.lang,
        home=home,
        r=summary,
        status=status_line(summary),
        cost=cost_text(summary.totals),
        tags=sorted(facts.tags),
        difficulties=sorted(facts.difficulties),
        outcomes=outcomes,
        metric_names=list(summary.metrics),
        rows_json="" if rows_src or rows_url else json_script(rows),
        rows_src=rows_src,
        spec_json=json_script(spec),
    )


def case_page(report: Report, case_id: str, back: str, home: str | None = None) -> str | None:
    """``rag view``'s case page: the case's data embedded, drawn by ``static/case.js``."""
    case = report.case(case_id)
    if case is None:
        return None
    return case_page_of(report, case, back, home)


def case_page_of(
    summary: ReportSummary, case: CaseResult, back: str, home: str | None = None
) -> str:
    """:func:`case_page` of one case read alone (the run's summary, not all its cases)."""
    payload = {"c": case.model_dump(mode="json"), "x": Extras(summary).of(case.id, case.trace)}
    return _render(
        "case.html",
        lang=_lang([case.question]),
        home=home,
        back=back,
        run_id=summary.run_id,
        info=json_script(run_info(summary, back, home)),
        payload=json_script(payload),
    )


def case_shell(summary: ReportSummary, back: str, assets: str, lang: str = "en") -> str:
    """The static export's one case page (``case.html#<chunk>/<id>``): it reads the run
    from ``run.js`` and the case from its data file, all in ``assets``."""
    return _render(
        "case.html", lang=lang, back=back,
        run_id=summary.run_id, assets=assets, payload=None, info=None,
    )  # fmt: skip


def _fmt_p(p: float | None) -> str:
    from app.eval.compare.render import fmt_p

    return "—" if p is None else fmt_p(p).removeprefix("p=")


def compare_page(
    base: Report,
    new: Report,
    comparison: Comparison,
    case_href: Mapping[str, str],
    base_href: str,
    new_href: str,
    home: str | None = None,
) -> str:
    from app.eval.compare import LABEL, UNVERIFIED
    from app.eval.compare.render import fmt_delta, fmt_value, repeat_lines

    tags, diffs = _tags(new)
    # --repeat: unstable cases left out of the verdicts / an offline candidate asked once
    repeat_text = [
        line.removeprefix("> ").replace("**", "") for line in repeat_lines(comparison) if line
    ]
    rows = compare_rows(base, new, case_href)
    metric_names = [m for m in new.metrics if m in base.metrics]
    spec: dict[str, Any] = {"kind": "compare", "metrics": metric_names, "page": 50}
    # the new run's outcome classes over the paired cases (none in an older report: no filter)
    counts = Counter(row["outcome"] for row in rows if row["outcome"])
    outcomes = [(o, LABELS.get(o, o), counts[o]) for o in new.outcomes if counts[o]]
    if outcomes:
        spec["outcomes"] = {o: label for o, label, _ in outcomes}
    return _render(
        "compare.html",
        lang=_lang([c.question for c in new.cases]),
        home=home,
        base=base,
        new=new,
        cmp=comparison,
        base_href=base_href,
        new_href=new_href,
        label=LABEL,
        unverified_label=UNVERIFIED,
        repeat_text=repeat_text,
        fmt_value=fmt_value,
        fmt_delta=fmt_delta,
        fmt_p=_fmt_p,
        tags=tags,
        difficulties=diffs,
        outcomes=outcomes,
        metric_names=metric_names,
        rows_json=json_script(rows),
        spec_json=json_script(spec),
    )


def compare_case_page(
    base: Report,
    new: Report,
    case_id: str,
    back: str,
    base_case_href: str,
    new_case_href: str,
    home: str | None = None,
    *,
    pair: tuple[CaseResult, CaseResult] | None = None,
    assets: str | None = None,
) -> str | None:
    """``pair``: the two results, when the caller has them (no search of the reports)."""
    old, case = pair if pair is not None else (base.case(case_id), new.case(case_id))
    if old is None or case is None:
        return None
    left, right = word_diff(old.answer or "", case.answer or "")
    row = compare_rows(base.model_copy(update={"cases": [old]}), new.model_copy(update={"cases": [case]}), {case_id: ""})[0]  # fmt: skip
    flags = [k.replace("_", " ") for k in ("changed", "improved", "regressed", "newly_refused", "newly_answered") if row[k]]  # fmt: skip
    metrics = []
    for name in new.metrics:
        b, n = old.value(name), case.value(name)
        d = row["d"].get(name)
        sign = _direction(new, name)
        cls = "" if d is None or abs(d) < 1e-9 or not sign else ("improved" if sign * d > 0 else "regressed")  # fmt: skip
        metrics.append({"name": name, "base": b, "new": n, "delta": "no data" if d is None else f"{d:+.3f}", "cls": cls})  # fmt: skip
    return _render(
        "compare_case.html",
        lang=_lang([case.question]),
        home=home,
        assets=assets,
        back=back,
        base=base,
        new=new,
        cid=case_id,
        question=case.question,
        flags=flags,
        left=left,
        right=right,
        metrics=metrics,
        errors=[f"base: {e}" for e in old.errors] + [f"new: {e}" for e in case.errors],
        base_case_href=base_case_href,
        new_case_href=new_case_href,
    )
