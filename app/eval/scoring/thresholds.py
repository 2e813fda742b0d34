"""Thresholds: one versioned TOML file, defaults overridable per suite.

``[bad_cases] judge_score_below`` is the bar of the one bad-case policy
(:func:`app.eval.report.io.bad_cases`): a judge score below it makes a case a bad case.

Verdicts compare a metric's suite mean with ``min`` / ``max``. A red-line metric fails
when any single case hits it, regardless of the mean. A metric with no defined values
gets the verdict ``no_data`` (reported, not a failure: the suite has no case it applies to)
— unless cases errored on it, which makes it ``fail``: a run where every call failed (a
revoked key, a dead server) must never pass. A metric the run did not compute at all
(``--metrics`` left it out) gets ``not_measured``, which fails the gate like ``fail``: a
gate that could not measure never passes.
More generally, unevaluated is not passed: a metric (red lines included) fails when more of
the cases it applies to errored than the share ``--max-errors`` tolerates (default 0).
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from app.errors import ConfigError

DEFAULT_PATH = Path(__file__).with_name("thresholds.toml")
Verdict = Literal["pass", "fail", "no_data", "not_measured"]


@dataclass(frozen=True)
class Threshold:
    metric: str
    min: float | None = None
    max: float | None = None

    def describe(self) -> str:
        return f">= {self.min:g}" if self.min is not None else f"<= {self.max:g}"


@dataclass(frozen=True)
class ThresholdSet:
    version: str
    path: Path
    sha256: str
    suite: str
    items: Mapping[str, Threshold]
    bad_judge_score: float  # [bad_cases] judge_score_below: a judge score under it is bad


def load_thresholds(suite: str, path: Path | None = None) -> ThresholdSet:
    """Defaults merged with ``[suites.<suite>]``. Raises :class:`ConfigError` on a bad file."""
    path = path or DEFAULT_PATH
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read thresholds ({exc})") from None
    version = data.get("version")
    if not isinstance(version, str):
        raise ConfigError(f'{path}: add a top-level version = "1.0"')
    merged: dict[str, Any] = dict(data.get("defaults", {}))
    merged.update(data.get("suites", {}).get(suite, {}) or {})
    items: dict[str, Threshold] = {}
    for name, spec in merged.items():
        if not isinstance(spec, dict) or set(spec) - {"min", "max"} or len(spec) != 1:
            raise ConfigError(
                f"{path}: threshold {name!r} must be {{ min = X }} or {{ max = X }}, got {spec!r}"
            )
        ((bound, value),) = spec.items()
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"{path}: threshold {name!r} must be a number, got {value!r}")
        items[name] = Threshold(name, **{bound: float(value)})
    bad = data.get("bad_cases")
    below = bad.get("judge_score_below") if isinstance(bad, dict) else None
    if (
        not isinstance(below, int | float)
        or isinstance(below, bool)
        or set(bad or {}) != {"judge_score_below"}
    ):
        raise ConfigError(
            f"{path}: add a [bad_cases] table with judge_score_below = 3.0 (a judge score "
            f"below it makes a case a bad case), got {bad!r}"
        )
    digest = "sha256:" + hashlib.sha256(raw).hexdigest()
    return ThresholdSet(version, path, digest, suite, items, float(below))


def load_margins(path: Path | None = None) -> dict[str, float]:
    """``[margins]``: each metric's margin of practical relevance (the delta table's
    verdicts; a metric not listed has margin 0). Raises :class:`ConfigError` on a bad entry."""
    path = path or DEFAULT_PATH
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read thresholds ({exc})") from None
    raw = data.get("margins", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: [margins] must be a table of metric = number")
    out: dict[str, float] = {}
    for name, value in raw.items():
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise ConfigError(
                f"{path}: [margins] {name} must be a number >= 0 (the metric's own unit, "
                f"rates as fractions), got {value!r}"
            )
        out[name] = float(value)
    return out


def _unevaluated(dist: Mapping[str, Any], max_errors: float) -> str | None:
    """Why a metric cannot pass: more of its cases errored than ``max_errors`` tolerates."""
    n, n_errors = int(dist.get("n", 0) or 0), int(dist.get("n_errors", 0) or 0)
    applies = n + n_errors
    if n_errors == 0 or n_errors <= max_errors * applies:
        return None
    return (
        f"{n_errors} of {applies} case(s) not evaluated (errors); --max-errors "
        f"{max_errors:g} tolerates {int(max_errors * applies)}: unevaluated is not passed"
    )


def verdicts(
    thresholds: ThresholdSet,
    summary: Mapping[str, Mapping[str, Any]],
    red_lines: Mapping[str, int],
    measured: Collection[str] | None = None,
    *,
    max_errors: float = 0.0,
) -> dict[str, dict[str, Any]]:
    """One verdict per threshold (and per red line): value, bound, verdict, reason.

    ``measured`` is the set of metrics the run computed (``None``: all of them). A metric
    fails when a red line was hit, when more of the cases it applies to errored (were not
    evaluated) than the share ``max_errors`` tolerates (default 0: any), or when its mean
    misses the bound. ``red_lines`` names every red-line metric (hits may be 0).
    """
    out: dict[str, dict[str, Any]] = {}
    for name, th in thresholds.items.items():
        dist = summary.get(name, {})
        mean = dist.get("mean")
        entry: dict[str, Any] = {
            "threshold": th.describe(),
            "min": th.min,
            "max": th.max,
            "value": mean,
            "n": dist.get("n", 0),
            "n_errors": dist.get("n_errors", 0),
        }
        hits = red_lines.get(name)
        unevaluated = _unevaluated(dist, max_errors)
        if measured is not None and name not in measured:
            entry.update(
                verdict="not_measured",
                reason="not measured (left out by --metrics): this gate cannot pass",
            )
        elif hits:
            entry.update(verdict="fail", reason=f"red line: {hits} case(s) hit it")
        elif mean is None and entry["n_errors"]:
            # every case it applies to errored (e.g. a revoked key): never a pass
            entry.update(
                verdict="fail",
                reason=f"no defined value: {entry['n_errors']} case(s) errored",
            )
        elif unevaluated is not None:
            entry.update(verdict="fail", reason=unevaluated)
        elif mean is None:
            entry.update(verdict="no_data", reason="no case with a defined value")
        elif (th.min is not None and mean < th.min) or (th.max is not None and mean > th.max):
            entry.update(verdict="fail", reason=f"mean {mean:.4g} not {th.describe()}")
        else:
            entry.update(verdict="pass", reason=None)
        out[name] = entry
    for name, hits in red_lines.items():
        if name in out or (measured is not None and name not in measured):
            continue
        dist = summary.get(name, {})
        unevaluated = _unevaluated(dist, max_errors)
        if hits or unevaluated is not None:
            out[name] = {
                "threshold": "= 0 (red line)",
                "min": None,
                "max": 0.0,
                "value": dist.get("mean"),
                "n": dist.get("n", 0),
                "n_errors": dist.get("n_errors", 0),
                "verdict": "fail",
                "reason": f"red line: {hits} case(s) hit it" if hits else unevaluated,
            }
    return out
