"""Staged rollout of a prompt version (seed 004 §4.3): the plan, the arms, the next step.

The plan is a ladder of stages; the default is the seed's::

    shadow   0 %  ≥ 24 h   answers compared, not served (evidence: a `rag shadow` report)
    canary   1 %  ≥ 30 min watch the 👎 rate and latency (evidence: candidate answers, no ❌)
    small   10 %  ≥ 2 h
    full   100 %  ≥ 24 h   then the candidate becomes active, the old active its fallback

and the old version stays ≥ :data:`KEEP_OLD_DAYS` days as the fallback. A top-level
``[rollout]`` table in ``releases.toml`` replaces it::

    [rollout]
    stages = [
      { name = "canary", percent = 5, min_minutes = 60, min_answers = 50 },
      { name = "full", percent = 100, min_minutes = 1440, min_answers = 500 },
    ]

**Arms.** A user (or session) is in the candidate arm when the stable hash of
``"<prompt id>|v<candidate>|<user id>"`` (SHA-256, first 8 bytes, modulo 10,000) falls below
``percent × 100``: the same user always sees the same arm; raising the percentage only adds
users (those of 1 % stay in at 10 %); a new candidate draws a new set of users. A request
without a user id is served the active version (arm ``control``); ``RAG_PROMPT_PIN`` wins over
any rollout (arm ``pinned``): the one-minute switch needs no file change.

This module is pure: what the evidence is (answers counted in the log, the A/B verdict, the
shadow report) is measured by the caller (``rag prompts canary``) and passed in as
:class:`Evidence`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from app.generation.registry.releases import Release, Releases, Rollout, parse_since

Arm = Literal["control", "candidate", "pinned"]
EvidenceKind = Literal["shadow", "answers"]
BUCKETS = 10_000  # a percentage has two decimals of resolution
KEEP_OLD_DAYS = 14


@dataclass(frozen=True)
class Stage:
    name: str
    percent: float
    min_minutes: int
    min_answers: int = 0  # candidate-arm answers (answers stages) or replayed answers (shadow)
    evidence: EvidenceKind = "answers"

    def describe(self) -> str:
        hours = self.min_minutes / 60
        span = f"{hours:g} h" if self.min_minutes >= 60 else f"{self.min_minutes} min"
        what = "shadow replay" if self.evidence == "shadow" else f"{self.percent:g} % of users"
        return f"{self.name} ({what}, ≥ {span}, ≥ {self.min_answers} answers)"


DEFAULT_PLAN: tuple[Stage, ...] = (
    Stage("shadow", 0, 24 * 60, min_answers=100, evidence="shadow"),
    Stage("canary", 1, 30, min_answers=20),
    Stage("small", 10, 2 * 60, min_answers=100),
    Stage("full", 100, 24 * 60, min_answers=500),
)


def plan_of(releases: Releases) -> tuple[Stage, ...]:
    """The ``[rollout]`` stages of ``releases.toml``, else :data:`DEFAULT_PLAN`; a stage
    that does not make sense is a :class:`ValueError` naming it and the field."""
    if releases.plan is None:
        return DEFAULT_PLAN
    stages: list[Stage] = []
    for i, raw in enumerate(releases.plan, start=1):
        where = f"releases.toml [rollout] stage {i}"
        name, percent = raw.get("name"), raw.get("percent")
        minutes, answers = raw.get("min_minutes", 0), raw.get("min_answers", 0)
        evidence = raw.get("evidence", "shadow" if percent == 0 else "answers")
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f'{where}: name = {name!r} must be a word like "canary"')
        if isinstance(percent, bool) or not isinstance(percent, int | float):
            raise ValueError(f"{where} ({name}): percent must be a number from 0 to 100")
        if not 0 <= percent <= 100:
            raise ValueError(f"{where} ({name}): percent = {percent} is outside 0 … 100")
        for key, value in (("min_minutes", minutes), ("min_answers", answers)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{where} ({name}): {key} = {value!r} must be a whole number ≥ 0")
        if evidence not in ("shadow", "answers"):
            raise ValueError(f'{where} ({name}): evidence must be "shadow" or "answers"')
        if evidence == "shadow" and percent != 0:
            raise ValueError(f"{where} ({name}): a shadow stage serves 0 % of users")
        if stages and percent < stages[-1].percent:
            raise ValueError(f"{where} ({name}): percentages must not go down along the plan")
        assert isinstance(minutes, int) and isinstance(answers, int)  # checked above
        stages.append(Stage(name, float(percent), minutes, answers, evidence))
    if len({s.name for s in stages}) != len(stages):
        raise ValueError("releases.toml [rollout]: two stages share a name")
    if stages[-1].percent != 100:
        raise ValueError("releases.toml [rollout]: the last stage must serve 100 % of users")
    return tuple(stages)


def bucket(prompt_id: str, candidate: int, subject: str) -> int:
    """The user's bucket, 0 … 9,999, for this prompt's rollout of ``candidate``."""
    digest = hashlib.sha256(f"{prompt_id}|v{candidate}|{subject}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


def in_candidate(rollout: Rollout, prompt_id: str, subject: str | None) -> bool:
    if subject is None or rollout.percent <= 0:
        return False
    return bucket(prompt_id, rollout.candidate, subject) < round(rollout.percent * BUCKETS / 100)


def arm_for(release: Release | None, subject: str | None) -> tuple[Arm, int | None]:
    """(arm, version) the release serves to ``subject`` (``None`` version: the caller's
    default, i.e. the registry's active version)."""
    rollout = release.rollout if release is not None else None
    if (
        rollout is not None
        and release is not None
        and in_candidate(rollout, release.prompt_id, subject)
    ):
        return "candidate", rollout.candidate
    return "control", None


@dataclass(frozen=True)
class Evidence:
    """What the caller measured for the stage under way."""

    answers: int | None = None  # candidate-arm answers since the stage began (answers stages)
    shadow_replayed: int | None = None  # a shadow report of this candidate: replayed answers
    shadow_problem: str | None = None  # why the shadow report given does not count
    regressions: tuple[str, ...] = ()  # metrics the A/B comparison flags ❌ for the candidate


@dataclass(frozen=True)
class Step:
    """Whether the stage under way may be left, and what is missing if not."""

    stage: Stage
    index: int
    elapsed: timedelta
    ready: bool
    missing: tuple[str, ...] = field(default=())
    next_stage: Stage | None = None  # None: the last stage; the next step makes it active


def stage_index(plan: Sequence[Stage], rollout: Rollout) -> int:
    for i, stage in enumerate(plan):
        if stage.name == rollout.stage:
            return i
    names = ", ".join(s.name for s in plan)
    raise ValueError(f"rollout.stage = {rollout.stage!r} is not a stage of the plan ({names})")


def _span(minutes: float) -> str:
    minutes = max(0.0, minutes)
    return f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min"


def assess(plan: Sequence[Stage], rollout: Rollout, now: datetime, ev: Evidence) -> Step:
    """May the rollout leave its stage at ``now``, given the evidence?"""
    i = stage_index(plan, rollout)
    stage = plan[i]
    elapsed = now - parse_since(rollout.since)
    missing: list[str] = []
    waited = elapsed.total_seconds() / 60
    if waited < stage.min_minutes:
        missing.append(
            f"time: {_span(waited)} of ≥ {_span(stage.min_minutes)} in {stage.name} "
            f"(ready at {(parse_since(rollout.since) + timedelta(minutes=stage.min_minutes)).strftime('%Y-%m-%d %H:%M UTC')})"
        )
    if stage.evidence == "shadow":
        if ev.shadow_problem is not None:
            missing.append(f"shadow evidence: {ev.shadow_problem}")
        elif ev.shadow_replayed is None:
            missing.append(
                "shadow evidence: give --shadow-report, a `rag shadow` report of the candidate"
            )
        elif ev.shadow_replayed < stage.min_answers:
            missing.append(
                f"shadow evidence: {ev.shadow_replayed} answers replayed, needs ≥ {stage.min_answers}"
            )
    else:
        if ev.answers is None:
            missing.append("answers: no answer log read (give --log)")
        elif ev.answers < stage.min_answers:
            missing.append(
                f"answers: {ev.answers} candidate answers since the stage began, "
                f"needs ≥ {stage.min_answers}"
            )
        if ev.regressions:
            missing.append(f"A/B: ❌ the candidate is worse on {', '.join(ev.regressions)}")
    nxt = plan[i + 1] if i + 1 < len(plan) else None
    return Step(stage, i, elapsed, not missing, tuple(missing), nxt)
