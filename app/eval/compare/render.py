"""The delta table as markdown (``rag eval compare --format md``, the PR comment)."""

from __future__ import annotations

from collections.abc import Sequence

from app.eval.compare.table import LABEL, UNVERIFIED, Comparison, MetricDelta

OFFLINE_NOTE = (
    "> **Offline-baseline numbers.** The candidate and/or judge is an offline "
    "heuristic (`offline:*`): these scores test the pipeline and the prompts' "
    "plumbing, not model quality. Only a run with real models says whether a "
    "prompt is better."
)


def comparison_markdown(c: Comparison) -> str:
    lines = [f"### {c.title}", ""]
    if c.unverified:
        why = c.unverified.removeprefix("no model ran: ").removeprefix("no model judged: ")
        lines += [
            f"> **⚠️ {UNVERIFIED}.** {why[0].upper()}{why[1:]}: the rows only a model can "
            "measure say ➖ not measured. Measure them with:",
            ">",
            f"> `{c.measure_with}`",
            "",
        ]
    if c.offline:
        lines += [OFFLINE_NOTE, ""]
    if c.ruler_changed:
        lines += ["> **Ruler changed** — compared anyway (`--allow-ruler-change`):"]
        lines += [f"> - {d}" for d in c.ruler_differences]
        lines.append("")
    if c.truth_differences:
        lines += ["> **Ground truth differs** — compared anyway (`--allow-truth-change`):"]
        lines += [f"> - {d}" for d in c.truth_differences]
        lines.append("")
    lines += c.answers.markdown(len(c.judge_only)) if c.answers is not None else []
    lines += repeat_lines(c)
    lines += ["| metric | base | new | Δ | verdict |", "|---|---|---|---|---|"]
    for r in c.rows:
        lines.append(
            f"| {r.metric} | {fmt_value(r, r.base_mean, r.base_std)} | "
            f"{fmt_value(r, r.new_mean, r.new_std)} | {fmt_delta(r)} | {fmt_verdict(r)} |"
        )
    lines.append("")
    significant = [t for t in c.tag_regressions if t.significant]
    others = len(c.tag_regressions) - len(significant)
    if significant:
        lines += [
            f"**Regressions by tag** (Benjamini–Hochberg q < α = {c.alpha} across the "
            f"{c.tag_tests} tag × metric pairs):",
            "",
            "| tag | metric | n | base | new | Δ | p | q (BH) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for t in significant:
            p = "—" if t.p_value is None else fmt_p(t.p_value).removeprefix("p=")
            q = "—" if t.q_value is None else fmt_p(t.q_value).removeprefix("p=")
            lines.append(
                f"| {t.tag} | {t.metric} | {t.n} | {t.base_mean:.3g} | {t.new_mean:.3g} | "
                f"{t.delta:+.3g} | {p} | {q} |"
            )
        lines.append("")
    else:
        lines += ["**Regressions by tag:** none significant.", ""]
    if others:
        lines += [
            f"{others} other tag × metric pair(s) got worse, not significantly after "
            "Benjamini–Hochberg (listed in `--format json`).",
            "",
        ]
    unpaired = len(c.unpaired_base) + len(c.unpaired_new)
    pair_note = f"Paired on {c.paired} case(s) by id"
    if unpaired:
        pair_note += (
            f"; unpaired: base only {fmt_ids(c.unpaired_base)}, new only {fmt_ids(c.unpaired_new)}"
        )
    lines += new_failures_markdown(c)
    lines.append(f"<sub>{pair_note}. {c.methods} Base/new cells: mean ± std.</sub>")
    for note in c.notes:
        lines.append(f"<sub>{note}</sub>")
    return "\n".join(lines) + "\n"


def new_failures_markdown(c: Comparison) -> list[str]:
    """The "new failures by cause" section: per outcome class, the paired cases that fail
    in new and did not fail that way in base (``+3 retrieval miss: smoke-004, …``)."""
    from app.eval.report.outcome import LABELS

    if c.new_failures is None:
        return []
    if not c.new_failures:
        return ["**New failures by cause:** none.", ""]
    counts = ", ".join(f"+{len(ids)} {LABELS.get(o, o)}" for o, ids in c.new_failures)
    lines = [f"**New failures by cause:** {counts}", ""]
    lines += [f"- {LABELS.get(o, o)}: {fmt_ids(ids, 12)}" for o, ids in c.new_failures]
    return [*lines, ""]


def repeat_lines(c: Comparison) -> list[str]:
    """``--repeat``: how many cases were unstable and that the verdicts use the stable ones;
    an offline candidate's samples are identical (asked once)."""
    lines: list[str] = []
    if c.sampled:  # a report whose model candidate was sampled K > 1 times
        stable = c.paired - len(c.unstable)
        ks = f"{c.samples[0]}" if c.samples[0] == c.samples[1] else "/".join(map(str, c.samples))
        lines.append(
            f"**Unstable cases: {len(c.unstable)} of {c.paired}** across --repeat {ks} samples "
            "(the outcome — refused, passed — flipped, or a score spread beyond its margin): "
            f"the verdicts and gates below use the {stable} stable case(s)"
            + (f"; left out: {fmt_ids(c.unstable)}." if c.unstable else ".")
        )
        lines.append("")
    for note in c.repeat_notes:
        lines += [f"> {note}", ""]
    return lines


def fmt_p(p: float) -> str:
    """``p=0.012`` or ``p<0.001``."""
    return f"p={p:.2g}" if p >= 0.001 else "p<0.001"


def fmt_ids(ids: Sequence[str], limit: int = 8) -> str:
    if not ids:
        return "none"
    shown = ", ".join(ids[:limit])
    return shown + (f" … (+{len(ids) - limit})" if len(ids) > limit else "")


def _is_rate(r: MetricDelta) -> bool:
    return r.scale == "binary" or r.unit == "rate"


def fmt_value(r: MetricDelta, mean: float | None, std: float | None) -> str:
    if mean is None:
        return "—"
    if _is_rate(r):
        return f"{mean * 100:.1f}%"
    return f"{mean:.2f} ± {std or 0.0:.2f}"


def fmt_delta(r: MetricDelta) -> str:
    if r.delta is None:
        return "—"
    if _is_rate(r):
        text = f"{r.delta * 100:+.1f} pp"
        if r.ci95 is not None:
            text += f" [{r.ci95[0] * 100:+.1f}, {r.ci95[1] * 100:+.1f}]"
        if r.discordant is not None:
            text += f" ({r.discordant[0]}↑ {r.discordant[1]}↓)"
        return text
    text = f"{r.delta:+.2f}"
    if r.ci95 is not None:
        text += f" [{r.ci95[0]:+.2f}, {r.ci95[1]:+.2f}]"
    return text


def fmt_verdict(r: MetricDelta) -> str:
    text = f"{r.symbol} {LABEL[r.verdict]}"
    details = list(r.reasons)
    if r.p_value is not None and r.verdict not in ("regression", "no_data", "not_measured"):
        details.append(fmt_p(r.p_value))
        if r.p_adjusted is not None and r.p_adjusted != r.p_value:
            details.append("Holm " + fmt_p(r.p_adjusted))
    return text + (f" ({'; '.join(details)})" if details else "")
