"""A run's one status: computed once, from the gate that was asked for, and said the same way
by every front end (the console, the ``.md`` and HTML titles, the viewer's badge,
``rag eval merge``, the pytest front end) — and the exit code follows it.

``rag eval run --gate`` chooses what sets the status (DESIGN "one voice"):

* ``thresholds`` — every threshold of ``thresholds.toml`` (seed 004 §9) and every red line;
* ``red-lines`` — only the red-line metrics (e.g. ``acl_leak``, seed 004 §9.3 "绝对红线");
  the quality thresholds are reported, never gating. ``make eval`` runs the offline baselines
  under this gate: a sentence-picker is not held to a model's bar.

A weak judge (``meta.judge.weak``: the local model tier, or one allowed by
``--allow-weak-judge``) never gates: under ``thresholds`` its metrics' verdicts are reported
and left out of the status, and the line says so ("judge metrics not gated (weak judge)").

Under either gate a partial run, a red line hit, and a gated metric that could not be
measured (``not_measured``, or more errors than ``--max-errors`` allows) fail: a gate that
could not measure never passes.

:func:`run_status` returns the status word (``pass`` / ``fail`` / ``partial``) and one line
that names what was gated, e.g. ``PASS — red lines held (acl_leak); quality not gated
(offline baseline)``. The report stores both (``status``, ``status_line``); readers print the
stored line (:func:`status_line`), so there is one text to compare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from app.eval.config import Gate

__all__ = ["GATES", "RunStatus", "exit_code", "run_status", "status_line"]

GATES: tuple[Gate, ...] = ("thresholds", "red-lines")
Status = Literal["pass", "fail", "partial"]
FAILED = ("fail", "not_measured")  # the verdicts a gate cannot pass


class VerdictLike(Protocol):
    @property
    def verdict(self) -> str: ...
    @property
    def reason(self) -> str | None: ...


@dataclass(frozen=True)
class RunStatus:
    status: Status
    line: str  # "PASS — red lines held (acl_leak); quality not gated (offline baseline)"
    gate: Gate
    failed: tuple[str, ...]  # the gated verdicts that failed (fail / not_measured)


def _names(names: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" … (+{len(names) - limit})" if len(names) > limit else "")


def _whose(candidate_offline: bool, judge_offline: bool) -> str:
    """Whose numbers these are, when they are not a model's."""
    if candidate_offline:
        return "offline baseline"
    return "judge scores by an offline judge" if judge_offline else ""


def run_status(
    *,
    gate: Gate,
    verdicts: Mapping[str, VerdictLike],
    red_lines: Sequence[str],
    partial_reason: str | None,
    cases_done: int,
    cases_planned: int,
    candidate_offline: bool,
    judge_offline: bool,
    shard: tuple[int, int, int] | None = None,
    weak_judge_metrics: Sequence[str] = (),
) -> RunStatus:
    """The status of a run under ``gate`` and its one line (see the module docstring).

    ``verdicts``: the threshold verdicts (:func:`app.eval.scoring.thresholds.verdicts`);
    ``red_lines``: the red-line metrics' names; ``shard``: ``(index, count, the run's planned
    cases)`` of a shard; ``weak_judge_metrics``: the judge metrics of a run whose judge is
    weak, which never gate."""
    red = [n for n in red_lines if n in verdicts]
    red_failed = [n for n in red if verdicts[n].verdict in FAILED]
    ungated = [n for n in verdicts if n in weak_judge_metrics and n not in red_lines]
    quality = [n for n in verdicts if n not in red_lines and n not in ungated]
    q_failed = [n for n in quality if verdicts[n].verdict in FAILED]
    q_met = [n for n in quality if verdicts[n].verdict == "pass"]
    whose = _whose(candidate_offline, judge_offline)
    if red_failed:
        held = "red line(s) failed: " + "; ".join(
            f"{n} ({verdicts[n].reason or verdicts[n].verdict})" for n in red_failed
        )
    elif red:
        held = f"red lines held ({_names(red)})"
    else:
        held = "no red line measured"
    if gate == "red-lines":
        gated_failed = red_failed if red else ["(no red line)"]
        if whose == "offline baseline":
            quality_text = "quality not gated (offline baseline)"
        else:
            missed = f"; {len(q_failed)} threshold(s) not met" if q_failed else ""
            quality_text = f"quality not gated (--gate red-lines{missed})"
            if whose:
                quality_text += f" — {whose}"
        detail = f"{held}; {quality_text}"
    else:
        gated_failed = [*red_failed, *q_failed]
        total = len(q_met) + len(q_failed)
        if q_failed:
            not_met = [n for n in q_failed if verdicts[n].verdict == "fail"]
            unmeasured = [n for n in q_failed if verdicts[n].verdict == "not_measured"]
            parts = []
            if not_met:
                parts.append(f"{len(not_met)} of {total} thresholds not met: {_names(not_met)}")
            if unmeasured:
                parts.append(f"not measured: {_names(unmeasured)}")
            quality_text = "; ".join(parts)
        else:
            quality_text = f"every threshold met ({total} of {total})"
        if ungated:
            quality_text += f"; judge metrics not gated (weak judge: {_names(ungated)})"
        detail = f"{held}; {quality_text}" if red_failed else f"{quality_text}; {held}"
        if whose == "offline baseline":
            detail += " — offline-baseline numbers, not a model's"
        elif whose:
            detail += f" — {whose}"
    if shard is not None:
        detail += f" — shard {shard[0]}/{shard[1]}: {cases_done} of the run's {shard[2]} cases"
    if partial_reason is not None:
        measured = f"on those cases: {detail}" if cases_done else "nothing was measured"
        line = (
            f"PARTIAL — {cases_done} of {cases_planned} cases run ({partial_reason}): "
            f"a gate over part of the suite cannot pass; {measured}"
        )
        return RunStatus("partial", line, gate, tuple(gated_failed))
    status: Status = "fail" if gated_failed else "pass"
    return RunStatus(status, f"{status.upper()} — {detail}", gate, tuple(gated_failed))


class _Summary(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def status_line(self) -> str | None: ...


def status_line(report: _Summary) -> str:
    """The report's one status line (a report written before status lines had only the
    word, under the thresholds gate)."""
    if report.status_line:
        return report.status_line
    return f"{report.status.upper()} — gate thresholds (a report written before status lines)"


def exit_code(report: _Summary) -> int:
    """0 when the run passed its gate, else 1 (a failed gate, a red line, a partial run)."""
    return 0 if report.status == "pass" else 1
