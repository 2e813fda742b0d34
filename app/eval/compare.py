"""Compare two evaluation reports: the metric delta table of seed 004 §4.2.

``compare_reports(base, new)`` pairs the cases of two reports (docs/interfaces.md §6) by
id, and for every metric computes the paired Δ, its significance and a verdict:

* ✅ ``better`` — a significant change in the good direction;
* ✅ ``within noise`` — no significant change in the bad direction;
* ⚠️ ``review`` — a change a human must look at: the spread grew (Brown–Forsythe, seed 004
  §12.3 "均值不变但方差扩大也是质量退化"), a refusal rate went up, a metric without a good
  direction moved, or the metric is missing from one report;
* ❌ ``regression`` — a significant change in the bad direction; ❌ ``red line`` — a
  red-line metric (e.g. ACL leak) got worse on any case or is above its limit.

Two reports measured with different rulers (judge model, judge prompt version/hash,
dataset version/hash) are refused with :class:`~app.errors.ReportError` unless
``allow_ruler_change=True``; then the title says so. Reports produced by an offline
candidate or judge are labelled as offline-baseline numbers in the title.

The statistics live in :mod:`app.eval.stats_tests`; :meth:`Comparison.to_markdown` and
:meth:`Comparison.to_dict` are the two output formats (``rag eval compare --format``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from app.errors import ReportError
from app.eval import stats_tests
from app.eval.records import Report

Verdict = Literal["better", "within_noise", "review", "regression", "red_line", "no_data"]

SYMBOL: dict[str, str] = {
    "better": "✅",
    "within_noise": "✅",
    "review": "⚠️",
    "regression": "❌",
    "red_line": "❌",
    "no_data": "➖",
}
LABEL: dict[str, str] = {
    "better": "better",
    "within_noise": "within noise",
    "review": "needs review",
    "regression": "significant regression",
    "red_line": "red line",
    "no_data": "no paired values",
}
# Metrics where "up" needs a human even when it is not significant (seed 004 §4.2: 拒答率 ⚠️).
REVIEW_WHEN_UP = ("refusal",)
# Derived from the cases' ``refused`` flags when the reports have no refusal-rate metric:
# seed 004 §4.2 lists 拒答率 in the table, ⚠️ when it moves (more refusals may be right or wrong).
REFUSAL_RATE = "refusal_rate"
REFUSAL_RATE_SPEC: dict[str, Any] = {
    "direction": "none",
    "kind": "derived",
    "unit": "rate",
    "scale": "binary",
    "red_line": False,
}
# Metric groups whose worsening is a cost, not a quality regression: ⚠️, never ❌.
COST_GROUPS = ("cost",)


@dataclass(frozen=True)
class MetricDelta:
    """One row of the delta table."""

    metric: str
    direction: str  # "higher" | "lower" | "none"
    scale: str  # "continuous" | "binary"
    unit: str
    red_line: bool
    n: int  # paired cases with a value in both reports
    base_mean: float | None
    new_mean: float | None
    delta: float | None
    base_std: float | None
    new_std: float | None
    test: str  # "wilcoxon" | "mcnemar" | "none"
    p_value: float | None
    ci95: tuple[float, float] | None
    variance_p: float | None
    discordant: tuple[int, int] | None  # McNemar (0→1, 1→0)
    verdict: Verdict
    reasons: tuple[str, ...]

    @property
    def symbol(self) -> str:
        return SYMBOL[self.verdict]


@dataclass(frozen=True)
class TagRegression:
    """A metric that got worse on the cases of one tag."""

    tag: str
    metric: str
    n: int
    base_mean: float
    new_mean: float
    delta: float
    p_value: float | None
    significant: bool


@dataclass(frozen=True)
class Comparison:
    base_label: str
    new_label: str
    title: str
    offline: bool
    ruler_changed: bool
    ruler_differences: tuple[str, ...]
    paired: int
    unpaired_base: tuple[str, ...]
    unpaired_new: tuple[str, ...]
    rows: tuple[MetricDelta, ...]
    tag_regressions: tuple[TagRegression, ...]
    notes: tuple[str, ...] = field(default=())
    alpha: float = stats_tests.ALPHA
    methods: str = stats_tests.METHODS

    @property
    def has_regression(self) -> bool:
        return any(r.verdict in ("regression", "red_line") for r in self.rows)

    @property
    def needs_review(self) -> bool:
        return any(r.verdict == "review" for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for row, raw in zip(self.rows, data["rows"], strict=True):
            raw["symbol"] = row.symbol
        data["has_regression"] = self.has_regression
        data["needs_review"] = self.needs_review
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=2)

    def to_markdown(self) -> str:
        lines = [f"### {self.title}", ""]
        if self.offline:
            lines += [
                "> **Offline-baseline numbers.** The candidate and/or judge is an offline "
                "heuristic (`offline:*`): these scores test the pipeline and the prompts' "
                "plumbing, not model quality. Only a run with real models says whether a "
                "prompt is better.",
                "",
            ]
        if self.ruler_changed:
            lines += ["> **Ruler changed** — compared anyway (`--allow-ruler-change`):"]
            lines += [f"> - {d}" for d in self.ruler_differences]
            lines.append("")
        lines += ["| metric | base | new | Δ | verdict |", "|---|---|---|---|---|"]
        for r in self.rows:
            lines.append(
                f"| {r.metric} | {_fmt_value(r, r.base_mean, r.base_std)} | "
                f"{_fmt_value(r, r.new_mean, r.new_std)} | {_fmt_delta(r)} | {_fmt_verdict(r)} |"
            )
        lines.append("")
        significant = [t for t in self.tag_regressions if t.significant]
        others = len(self.tag_regressions) - len(significant)
        if significant:
            lines += [
                f"**Regressions by tag** (significant at α = {self.alpha} on the tag's cases):",
                "",
                "| tag | metric | n | base | new | Δ | p |",
                "|---|---|---|---|---|---|---|",
            ]
            for t in significant:
                p = "—" if t.p_value is None else _fmt_p(t.p_value).removeprefix("p=")
                lines.append(
                    f"| {t.tag} | {t.metric} | {t.n} | {t.base_mean:.3g} | {t.new_mean:.3g} | "
                    f"{t.delta:+.3g} | {p} |"
                )
            lines.append("")
        else:
            lines += ["**Regressions by tag:** none significant.", ""]
        if others:
            lines += [
                f"{others} other tag × metric pair(s) got worse within noise "
                "(listed in `--format json`).",
                "",
            ]
        unpaired = len(self.unpaired_base) + len(self.unpaired_new)
        pair_note = f"Paired on {self.paired} case(s) by id"
        if unpaired:
            pair_note += (
                f"; unpaired: base only {_fmt_ids(self.unpaired_base)}, "
                f"new only {_fmt_ids(self.unpaired_new)}"
            )
        lines.append(f"<sub>{pair_note}. {self.methods} Base/new cells: mean ± std.</sub>")
        for note in self.notes:
            lines.append(f"<sub>{note}</sub>")
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- loading


def load_report(path: Path) -> dict[str, Any]:
    """Read a report JSON file; a missing or malformed file is a :class:`ReportError`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: no such report; pass a reports/eval_*.json file") from None
    except json.JSONDecodeError as exc:
        raise ReportError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); is this an eval report?"
        ) from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: a report is a JSON object, got {type(data).__name__}")
    for key in ("meta", "metrics", "cases"):
        if key not in data:
            raise ReportError(
                f"{path}: missing top-level field {key!r} (docs/interfaces.md §6); "
                "was it written by `rag eval run`?"
            )
    cases = data["cases"]
    if not isinstance(cases, list):
        raise ReportError(f"{path}: 'cases' must be a list")
    for i, case in enumerate(cases):
        metrics = case.get("metrics") if isinstance(case, dict) else None
        if not isinstance(metrics, dict):
            raise ReportError(f"{path}: cases[{i}] has no 'metrics' object")
        for name, entry in metrics.items():
            value = entry.get("value") if isinstance(entry, dict) else entry
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise ReportError(
                    f"{path}: cases[{i}] ({case.get('id')}) metric {name!r} has value "
                    f"{value!r}; a value is a number, or null with a reason"
                )
    return data


# ---------------------------------------------------------------- rulers


def _judge_name(meta: Mapping[str, Any]) -> str:
    judge = meta.get("judge") or {}
    return str(judge.get("provider") or judge.get("model") or "no judge")


def _judge_desc(meta: Mapping[str, Any]) -> str:
    judge = meta.get("judge") or {}
    prompts = judge.get("prompts") or {}
    versions = ", ".join(
        f"{p.get('version', pid)} {str(p.get('hash', ''))[:19]}".strip()
        for pid, p in sorted(prompts.items())
    )
    return f"{_judge_name(meta)}" + (f" [{versions}]" if versions else "")


def ruler_differences(base: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What makes the two reports incomparable: judge model, judge prompts, datasets."""
    bm, nm = base.get("meta") or {}, new.get("meta") or {}
    out: list[str] = []
    bj, nj = bm.get("judge") or {}, nm.get("judge") or {}
    if _judge_name(bm) != _judge_name(nm):
        out.append(f"judge model: base {_judge_name(bm)} vs new {_judge_name(nm)}")
    if bj.get("samples") != nj.get("samples"):
        out.append(f"judge samples: base {bj.get('samples')} vs new {nj.get('samples')}")
    bp, np_ = bj.get("prompts") or {}, nj.get("prompts") or {}
    for pid in sorted(set(bp) | set(np_)):
        b, n = bp.get(pid), np_.get(pid)
        if b is None or n is None:
            out.append(f"judge prompt {pid}: only in {'new' if b is None else 'base'}")
        elif (b.get("version"), b.get("hash")) != (n.get("version"), n.get("hash")):
            out.append(
                f"judge prompt {pid}: base {b.get('version')} ({b.get('hash')}) vs "
                f"new {n.get('version')} ({n.get('hash')})"
            )
    bd = {d.get("name"): d for d in bm.get("datasets") or []}
    nd = {d.get("name"): d for d in nm.get("datasets") or []}
    for name in sorted(set(bd) | set(nd), key=str):
        b, n = bd.get(name), nd.get(name)
        if b is None or n is None:
            out.append(f"dataset {name}: only in {'new' if b is None else 'base'}")
        elif b.get("version") != n.get("version") or b.get("sha256") != n.get("sha256"):
            out.append(
                f"dataset {name}: base v{b.get('version')} ({str(b.get('sha256'))[:12]}) vs "
                f"new v{n.get('version')} ({str(n.get('sha256'))[:12]})"
            )
    return out


def _is_offline(meta: Mapping[str, Any]) -> bool:
    """The report's own ``meta.candidate.offline`` / ``meta.judge.offline`` flags (the
    runner sets them from the parsed model string)."""
    return any(bool((meta.get(part) or {}).get("offline")) for part in ("candidate", "judge"))


def _prompt_labels(
    base: Mapping[str, Any], new: Mapping[str, Any], base_path: str, new_path: str
) -> tuple[str, str]:
    """``(base label, new label)``: the prompt versions that differ, else the run ids."""
    bp = (base.get("meta") or {}).get("prompts") or {}
    np_ = (new.get("meta") or {}).get("prompts") or {}
    differ = [
        pid
        for pid in sorted(set(bp) | set(np_))
        if (bp.get(pid) or {}).get("hash") != (np_.get(pid) or {}).get("hash")
    ]

    def label(report: Mapping[str, Any], prompts: Mapping[str, Any], path: str) -> str:
        run = str(report.get("run_id") or Path(path).name)
        versions = [
            str((prompts.get(pid) or {}).get("version", f"{pid}: absent")) for pid in differ
        ]
        return f"{', '.join(versions)} (run {run})" if versions else f"run {run}"

    return label(base, bp, base_path), label(new, np_, new_path)


# ---------------------------------------------------------------- comparison


def compare_reports(
    base: Mapping[str, Any] | Report,
    new: Mapping[str, Any] | Report,
    *,
    base_name: str = "base",
    new_name: str = "new",
    allow_ruler_change: bool = False,
    alpha: float = stats_tests.ALPHA,
) -> Comparison:
    """Compare two loaded reports (see the module docstring for the rules)."""
    if isinstance(base, Report):
        base = base.model_dump(mode="json")
    if isinstance(new, Report):
        new = new.model_dump(mode="json")
    diffs = ruler_differences(base, new)
    bm, nm = base.get("meta") or {}, new.get("meta") or {}
    if diffs and not allow_ruler_change:
        raise ReportError(
            f"refusing to compare {base_name} and {new_name}: they were measured with "
            f"different rulers — base judged by {_judge_desc(bm)}, new judged by "
            f"{_judge_desc(nm)}. Differences: " + "; ".join(diffs) + ". Re-run both with the "
            "same judge and dataset, or pass --allow-ruler-change to compare anyway."
        )
    base_cases = _cases_by_id(base, base_name)
    new_cases = _cases_by_id(new, new_name)
    paired_ids = [cid for cid in base_cases if cid in new_cases]
    unpaired_base = tuple(cid for cid in base_cases if cid not in new_cases)
    unpaired_new = tuple(cid for cid in new_cases if cid not in base_cases)
    if not paired_ids:
        raise ReportError(
            f"{base_name} and {new_name} share no case id; were they run on the same suite?"
        )

    bmeta, nmeta = base.get("metrics") or {}, new.get("metrics") or {}
    rows: list[MetricDelta] = []
    tags: list[TagRegression] = []
    notes: list[str] = []
    for metric in list(bmeta) + [m for m in nmeta if m not in bmeta]:
        spec = dict(bmeta.get(metric) or nmeta.get(metric) or {})
        if metric not in bmeta or metric not in nmeta:
            where = "new" if metric not in bmeta else "base"
            rows.append(_missing_row(metric, spec, where))
            continue
        pairs = _pairs(base_cases, new_cases, paired_ids, metric)
        rows.append(_row(metric, spec, pairs, alpha))
        tags.extend(_tag_regressions(metric, spec, pairs, base_cases, alpha))
    if REFUSAL_RATE not in bmeta and REFUSAL_RATE not in nmeta:
        refusals = _refusal_pairs(base_cases, new_cases, paired_ids)
        if refusals:
            rows.append(_row(REFUSAL_RATE, REFUSAL_RATE_SPEC, refusals, alpha))
    for report, name in ((base, base_name), (new, new_name)):
        if report.get("partial"):
            notes.append(f"{name} is a partial run: only its finished cases are compared.")

    offline = _is_offline(bm) or _is_offline(nm)
    base_label, new_label = _prompt_labels(base, new, base_name, new_name)
    title = f"Delta table: {base_label} → {new_label}"
    if offline:
        title = "Offline-baseline numbers — " + title
    if diffs:
        title += " — ruler changed, compared with --allow-ruler-change"
    tags.sort(key=lambda t: (not t.significant, t.p_value if t.p_value is not None else 1.0))
    return Comparison(
        base_label=base_label,
        new_label=new_label,
        title=title,
        offline=offline,
        ruler_changed=bool(diffs),
        ruler_differences=tuple(diffs),
        paired=len(paired_ids),
        unpaired_base=unpaired_base,
        unpaired_new=unpaired_new,
        rows=tuple(rows),
        tag_regressions=tuple(tags),
        notes=tuple(notes),
        alpha=alpha,
    )


def compare_files(base: Path, new: Path, **kwargs: Any) -> Comparison:
    return compare_reports(
        load_report(base), load_report(new), base_name=str(base), new_name=str(new), **kwargs
    )


Pair = tuple[str, float, float]  # case id, base value, new value


def _cases_by_id(report: Mapping[str, Any], name: str) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for i, case in enumerate(report.get("cases") or []):
        cid = case.get("id") if isinstance(case, Mapping) else None
        if not isinstance(cid, str):
            raise ReportError(f"{name}: cases[{i}] has no string 'id'")
        if cid in out:
            raise ReportError(f"{name}: case id {cid!r} appears twice; ids must be unique")
        out[cid] = case
    return out


def _value(case: Mapping[str, Any], metric: str) -> float | None:
    entry = (case.get("metrics") or {}).get(metric)
    if entry is None:
        return None
    value = entry.get("value") if isinstance(entry, Mapping) else entry
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def _pairs(
    base_cases: Mapping[str, Mapping[str, Any]],
    new_cases: Mapping[str, Mapping[str, Any]],
    ids: Sequence[str],
    metric: str,
) -> list[Pair]:
    pairs: list[Pair] = []
    for cid in ids:
        b, n = _value(base_cases[cid], metric), _value(new_cases[cid], metric)
        if b is not None and n is not None:
            pairs.append((cid, b, n))
    return pairs


def _refusal_pairs(
    base_cases: Mapping[str, Mapping[str, Any]],
    new_cases: Mapping[str, Mapping[str, Any]],
    ids: Sequence[str],
) -> list[Pair]:
    pairs: list[Pair] = []
    for cid in ids:
        b, n = base_cases[cid].get("refused"), new_cases[cid].get("refused")
        if isinstance(b, bool) and isinstance(n, bool):
            pairs.append((cid, float(b), float(n)))
    return pairs


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _missing_row(metric: str, spec: Mapping[str, Any], where: str) -> MetricDelta:
    return MetricDelta(
        metric=metric,
        direction=str(spec.get("direction", "higher")),
        scale=str(spec.get("scale", "continuous")),
        unit=str(spec.get("unit", "")),
        red_line=bool(spec.get("red_line", False)),
        n=0,
        base_mean=None,
        new_mean=None,
        delta=None,
        base_std=None,
        new_std=None,
        test="none",
        p_value=None,
        ci95=None,
        variance_p=None,
        discordant=None,
        verdict="review",
        reasons=(f"only in the {where} report",),
    )


def _row(metric: str, spec: Mapping[str, Any], pairs: Sequence[Pair], alpha: float) -> MetricDelta:
    direction = str(spec.get("direction", "higher"))
    scale = str(spec.get("scale", "continuous"))
    red_line = bool(spec.get("red_line", False))
    base_v = [b for _, b, _ in pairs]
    new_v = [n for _, _, n in pairs]
    if not pairs:
        row = _missing_row(metric, spec, "neither")
        return MetricDelta(
            **{**asdict(row), "verdict": "no_data", "reasons": ("no case has a value in both",)}
        )
    bmean, nmean = _mean(base_v), _mean(new_v)
    delta = nmean - bmean
    ci: tuple[float, float] | None = None
    discordant: tuple[int, int] | None = None
    variance_p: float | None = None
    if scale == "binary":
        mc = stats_tests.mcnemar_exact(base_v, new_v)
        test, p, discordant = "mcnemar", mc.p_value, (mc.up, mc.down)
    else:
        test, p = "wilcoxon", stats_tests.wilcoxon_p(base_v, new_v)
        ci = stats_tests.bootstrap_ci(base_v, new_v)
        variance_p = stats_tests.brown_forsythe_p(base_v, new_v)
    bstd, nstd = _std(base_v), _std(new_v)

    sign = {"higher": 1.0, "lower": -1.0}.get(direction, 0.0)
    gain = sign * delta  # > 0: better
    significant = p < alpha and not math.isclose(delta, 0.0, abs_tol=1e-12)
    reasons: list[str] = []
    verdict: Verdict
    worse_cases = [cid for cid, b, n in pairs if sign * (n - b) < -1e-12]
    limit = spec.get("threshold", 0.0 if direction == "lower" else None)
    over_limit = (
        red_line
        and isinstance(limit, int | float)
        and (nmean > limit if direction == "lower" else nmean < limit)
    )
    if red_line and (worse_cases or over_limit):
        verdict = "red_line"
        if worse_cases:
            reasons.append(f"worse on {len(worse_cases)} case(s): {_fmt_ids(worse_cases)}")
        if over_limit:
            reasons.append(f"new {nmean:.3g} beyond the red line {limit}")
    elif sign != 0.0 and significant and gain < 0 and str(spec.get("group")) in COST_GROUPS:
        verdict = "review"
        reasons.append(f"{metric} worse: a cost, not a quality regression")
    elif sign != 0.0 and significant and gain < 0:
        verdict = "regression"
        reasons.append(f"{_fmt_p(p)} < α={alpha}")
    else:
        verdict = "better" if sign != 0.0 and significant and gain > 0 else "within_noise"
        if delta > 1e-12 and any(key in metric.lower() for key in REVIEW_WHEN_UP):
            verdict = "review"
            reasons.append("refusal rate up")
        elif sign == 0.0 and abs(delta) > 1e-12:
            verdict = "review"
            reasons.append("changed; this metric has no better direction")
        if variance_p is not None and variance_p < alpha and nstd > bstd:
            verdict = "review"
            reasons.append(
                f"variance up (std {bstd:.3g} → {nstd:.3g}, Brown–Forsythe {_fmt_p(variance_p)})"
            )
    return MetricDelta(
        metric=metric,
        direction=direction,
        scale=scale,
        unit=str(spec.get("unit", "")),
        red_line=red_line,
        n=len(pairs),
        base_mean=bmean,
        new_mean=nmean,
        delta=delta,
        base_std=bstd,
        new_std=nstd,
        test=test,
        p_value=p,
        ci95=ci,
        variance_p=variance_p,
        discordant=discordant,
        verdict=verdict,
        reasons=tuple(reasons),
    )


def _tag_regressions(
    metric: str,
    spec: Mapping[str, Any],
    pairs: Sequence[Pair],
    base_cases: Mapping[str, Mapping[str, Any]],
    alpha: float,
) -> list[TagRegression]:
    sign = {"higher": 1.0, "lower": -1.0}.get(str(spec.get("direction", "higher")), 0.0)
    if sign == 0.0 or str(spec.get("group")) in COST_GROUPS:
        return []
    by_tag: dict[str, list[Pair]] = {}
    for pair in pairs:
        for tag in base_cases[pair[0]].get("tags") or []:
            by_tag.setdefault(str(tag), []).append(pair)
    out: list[TagRegression] = []
    for tag, tp in sorted(by_tag.items()):
        b = [x for _, x, _ in tp]
        n = [y for _, _, y in tp]
        delta = _mean(n) - _mean(b)
        if sign * delta >= -1e-12:
            continue
        if str(spec.get("scale")) == "binary":
            p = stats_tests.mcnemar_exact(b, n).p_value
        else:
            p = stats_tests.wilcoxon_p(b, n)
        out.append(
            TagRegression(
                tag=tag,
                metric=metric,
                n=len(tp),
                base_mean=_mean(b),
                new_mean=_mean(n),
                delta=delta,
                p_value=p,
                significant=p < alpha,
            )
        )
    return out


# ---------------------------------------------------------------- formatting


def _fmt_p(p: float) -> str:
    """``p=0.012`` or ``p<0.001``."""
    return f"p={p:.2g}" if p >= 0.001 else "p<0.001"


def _fmt_ids(ids: Sequence[str], limit: int = 8) -> str:
    if not ids:
        return "none"
    shown = ", ".join(ids[:limit])
    return shown + (f" … (+{len(ids) - limit})" if len(ids) > limit else "")


def _is_rate(r: MetricDelta) -> bool:
    return r.scale == "binary" or r.unit == "rate"


def _fmt_value(r: MetricDelta, mean: float | None, std: float | None) -> str:
    if mean is None:
        return "—"
    if _is_rate(r):
        return f"{mean * 100:.1f}%"
    return f"{mean:.2f} ± {std or 0.0:.2f}"


def _fmt_delta(r: MetricDelta) -> str:
    if r.delta is None:
        return "—"
    if _is_rate(r):
        text = f"{r.delta * 100:+.1f} pp"
        if r.discordant is not None:
            text += f" ({r.discordant[0]}↑ {r.discordant[1]}↓)"
        return text
    text = f"{r.delta:+.2f}"
    if r.ci95 is not None:
        text += f" [{r.ci95[0]:+.2f}, {r.ci95[1]:+.2f}]"
    return text


def _fmt_verdict(r: MetricDelta) -> str:
    text = f"{r.symbol} {LABEL[r.verdict]}"
    details = list(r.reasons)
    if r.p_value is not None and r.verdict not in ("regression", "no_data"):
        details.append(_fmt_p(r.p_value))
    return text + (f" ({'; '.join(details)})" if details else "")
