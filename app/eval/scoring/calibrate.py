"""Judge calibration against human labels (seed 004 §10.2: 人工校准, target > 85 %).

A labels file is JSONL, one row per (case, candidate answer, metric) a business expert
scored blind on the judge's 1–5 rubric::

    {"id": "cal-001", "question": "…", "context": "…", "candidate": "…",
     "golden_answer": "…", "metric": "faithfulness", "human_score": 5,
     "annotator": "biz-expert-1", "source": "hr/annual_leave.md", "note": "…",
     "expected_refusal": false}

:func:`calibrate` asks the judge (``judge/<metric>`` from the registry, through the
engine, ``samples`` samples averaged exactly as in an eval run) and measures agreement:

* the judge's score for a row is the mean of its samples, rounded half up to an integer
  1–5 (the human scale);
* **exact agreement** — share of rows where that integer equals the human score;
* **±1 agreement** — share of rows within one point;
* **weighted Cohen's κ** with quadratic weights ``w_ij = (i−j)² / (k−1)²`` over the five
  categories, on the integer scores;
* **Spearman ρ** (``scipy.stats.spearmanr``) between the judge's *mean* and the human score.

A judge error (a sample that did not parse, a provider failure) is a row without a judge
score: it counts as a disagreement in both agreement rates (the judge did not agree) and is
left out of κ and ρ; the number of errors is reported.

**The verdict uses exact agreement** — the strict reading of seed 004's "一致率": > 85 %
pass, 75 %–85 % warn, < 75 % fail (the CLI exits 1). ±1 agreement is printed but not
used: on a 5-point scale a judge that always answers 3 already reaches 60 %+ within ±1.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from app.errors import ConfigError, DatasetError

if TYPE_CHECKING:
    from app.eval.scoring.registry import JudgeInput
    from app.llm.spec import ModelRef
    from app.llm.types import EngineLike

PASS_ABOVE = 0.85
WARN_FROM = 0.75
CATEGORIES = (1, 2, 3, 4, 5)
CalibrationVerdict = Literal["pass", "warn", "fail"]


class LabelRow(BaseModel):
    """One human-labelled row; unknown fields are errors (a typo is not a default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    context: str = ""
    candidate: str
    golden_answer: str
    metric: str  # a judge metric of the judge table (app.eval.scoring.table)
    human_score: int = Field(ge=1, le=5)
    annotator: str = Field(min_length=1)
    source: str | None = None
    note: str | None = None
    expected_refusal: bool = False
    # set by the editor's review queue (app.eval.report.calibration_queue): where the row was
    # taken from and what that run's judge said (shown to the expert only after scoring)
    report: str | None = None  # run id
    case_id: str | None = None
    judge_prompt: str | None = None  # e.g. judge/faithfulness_v1
    judge_model: str | None = None
    judge_score: float | None = Field(default=None, ge=1, le=5)
    judge_reasoning: str | None = None
    labelled_at: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")

    @field_validator("metric")
    @classmethod
    def _known_metric(cls, value: str) -> str:
        from app.eval.scoring.table import judge_table

        known = judge_table()
        if value not in known:
            raise ValueError(f"unknown judge metric {value!r}; known: {', '.join(known)}")
        return value

    def judge_input(self) -> JudgeInput:
        from app.eval.scoring.registry import JudgeInput

        return JudgeInput(
            question=self.question,
            candidate=self.candidate,
            context=self.context,
            golden_answer=self.golden_answer,
            expected_refusal=self.expected_refusal,
        )


@dataclass(frozen=True)
class ScoredRow:
    id: str
    metric: str
    human: int
    judge_mean: float | None
    judge_score: int | None  # judge_mean rounded half up
    error: str | None = None


@dataclass(frozen=True)
class Agreement:
    n: int
    n_errors: int
    exact: float
    within_one: float
    kappa: float | None
    spearman: float | None


@dataclass(frozen=True)
class CalibrationResult:
    judge: str
    labels: str
    samples: int
    overall: Agreement
    per_metric: dict[str, Agreement]
    verdict: CalibrationVerdict
    rows: tuple[ScoredRow, ...] = field(default=())
    #: the seed's rule per judge prompt (> 85 % pass, below 75 % revise the prompt): metric ->
    #: (the judge prompt it renders, its verdict)
    per_prompt: dict[str, tuple[str, CalibrationVerdict]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_text(self) -> str:
        o = self.overall
        lines = [
            f"judge {self.judge} on {self.labels} ({o.n} rows, {self.samples} sample(s) each)",
            _fmt_agreement("overall", o),
        ]
        lines += [_fmt_agreement(m, a) for m, a in sorted(self.per_metric.items())]
        for metric, (prompt, verdict) in sorted(self.per_prompt.items()):
            exact = self.per_metric[metric].exact
            advice = " — revise the judge prompt" if verdict == "fail" else ""
            lines.append(f"  {prompt}: {verdict.upper()} (exact {exact:.1%}){advice}")
        lines.append(
            f"verdict: {self.verdict.upper()} — exact agreement {o.exact:.1%} "
            f"(pass > {PASS_ABOVE:.0%}, warn {WARN_FROM:.0%}–{PASS_ABOVE:.0%}, "
            f"fail < {WARN_FROM:.0%}; every judge prompt must pass on its own)"
        )
        worst = [r for r in self.rows if r.judge_score is None or abs(r.judge_score - r.human) >= 2]
        if worst:
            lines.append("disagreements of 2+ points or judge errors:")
            for r in worst:
                got = r.error if r.judge_score is None else f"judge {r.judge_mean:.2f}"
                lines.append(f"  {r.id} {r.metric}: human {r.human}, {got}")
        return "\n".join(lines) + "\n"


def _fmt_agreement(name: str, a: Agreement) -> str:
    kappa = "n/a" if a.kappa is None else f"{a.kappa:.3f}"
    rho = "n/a" if a.spearman is None else f"{a.spearman:.3f}"
    return (
        f"  {name:<13} n={a.n:<3} exact={a.exact:6.1%}  ±1={a.within_one:6.1%}  "
        f"κ(quadratic)={kappa}  Spearman ρ={rho}  errors={a.n_errors}"
    )


# ---------------------------------------------------------------- labels


def load_labels(path: Path) -> list[LabelRow]:
    """Read and validate every line; all problems are reported together."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such labels file") from None
    rows: list[LabelRow] = []
    problems: list[str] = []
    seen: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = LabelRow.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{lineno}: not valid JSON ({exc.msg})")
            continue
        except ValidationError as exc:
            for err in exc.errors():
                where = ".".join(str(p) for p in err["loc"]) or "(row)"
                problems.append(f"{path}:{lineno}: field {where}: {err['msg']}")
            continue
        if row.id in seen:
            problems.append(f"{path}:{lineno}: field id: {row.id!r} appears twice")
        seen.add(row.id)
        rows.append(row)
    if problems:
        raise DatasetError("invalid labels file:\n" + "\n".join(problems))
    if not rows:
        raise DatasetError(f"{path}: no labelled rows")
    return rows


# ---------------------------------------------------------------- statistics


def round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def quadratic_weighted_kappa(
    a: Sequence[int], b: Sequence[int], categories: Sequence[int] = CATEGORIES
) -> float | None:
    """Cohen's κ with quadratic disagreement weights; ``None`` when undefined."""
    if len(a) != len(b):
        raise ValueError("rating lists differ in length")
    if not a:
        return None
    k = len(categories)
    index = {c: i for i, c in enumerate(categories)}
    n = len(a)
    observed = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        observed[index[x]][index[y]] += 1.0 / n
    row = [sum(observed[i]) for i in range(k)]
    col = [sum(observed[i][j] for i in range(k)) for j in range(k)]
    num = den = 0.0
    for i in range(k):
        for j in range(k):
            w = (i - j) ** 2 / (k - 1) ** 2
            num += w * observed[i][j]
            den += w * row[i] * col[j]
    if den == 0.0:
        return None  # both raters constant on the same category: κ is undefined
    return 1.0 - num / den


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    if len(a) < 2 or len(set(a)) < 2 or len(set(b)) < 2:
        return None  # a constant series has no rank correlation
    from scipy import stats

    return float(stats.spearmanr(a, b).statistic)


def agreement(rows: Sequence[ScoredRow]) -> Agreement:
    ok = [r for r in rows if r.judge_score is not None and r.judge_mean is not None]
    n = len(rows)
    exact = sum(1 for r in ok if r.judge_score == r.human) / n if n else 0.0
    near = sum(1 for r in ok if abs((r.judge_score or 0) - r.human) <= 1) / n if n else 0.0
    kappa = quadratic_weighted_kappa([r.human for r in ok], [r.judge_score or 0 for r in ok])
    rho = spearman([float(r.human) for r in ok], [r.judge_mean or 0.0 for r in ok])
    return Agreement(
        n=n, n_errors=n - len(ok), exact=exact, within_one=near, kappa=kappa, spearman=rho
    )


def verdict_for(exact: float) -> CalibrationVerdict:
    if exact > PASS_ABOVE:
        return "pass"
    if exact >= WARN_FROM:
        return "warn"
    return "fail"


# ---------------------------------------------------------------- running the judge


async def score_rows(
    rows: Sequence[LabelRow], judge: str, *, samples: int = 3, engine: EngineLike | None = None
) -> list[ScoredRow]:
    """Score every labelled row with the judge (the same code path as an eval run)."""
    from app.eval.scoring.judges import JudgeConfig, score_judge
    from app.eval.scoring.table import judge_table
    from app.generation.registry import RenderedPrompt, render
    from app.llm.engine import Engine
    from app.llm.providers.families import parse_model

    def renderer(prompt_id: str, model: ModelRef, variables: Mapping[str, str]) -> RenderedPrompt:
        return render(prompt_id, model=model, variables=dict(variables))

    # ``judge`` comes from ``rag judge calibrate --judge`` (checked there) or a library caller
    config = JudgeConfig(model=parse_model(judge), samples=samples)
    table = judge_table()
    own: Engine | None = None
    eng: EngineLike
    if engine is None:
        eng = own = Engine()
    else:
        eng = engine
    try:

        async def one(row: LabelRow) -> ScoredRow:
            entry = table[row.metric]
            score = await score_judge(eng, config, entry, row.judge_input(), renderer)
            if score.value is None:
                return ScoredRow(row.id, row.metric, row.human_score, None, None, score.reason)
            value = float(score.value)
            return ScoredRow(row.id, row.metric, row.human_score, value, round_half_up(value))

        return list(await asyncio.gather(*(one(r) for r in rows)))
    finally:
        if own is not None:
            await own.aclose()


_ORDER: dict[CalibrationVerdict, int] = {"pass": 0, "warn": 1, "fail": 2}


def summarise(
    scored: Sequence[ScoredRow],
    *,
    judge: str,
    labels: str,
    samples: int,
    prompts: Mapping[str, str] | None = None,
) -> CalibrationResult:
    """Agreement overall and per metric; the verdict is the worst of the overall one and each
    judge prompt's (``prompts``: metric -> the prompt id it renders; default ``judge/<m>``)."""
    overall = agreement(scored)
    per_metric = {
        m: agreement([r for r in scored if r.metric == m])
        for m in sorted({r.metric for r in scored})
    }
    per_prompt = {
        m: ((prompts or {}).get(m) or f"judge/{m}", verdict_for(a.exact))
        for m, a in per_metric.items()
    }
    verdict = max(
        [verdict_for(overall.exact), *(v for _, v in per_prompt.values())], key=_ORDER.__getitem__
    )
    return CalibrationResult(
        judge=judge,
        labels=labels,
        samples=samples,
        overall=overall,
        per_metric=per_metric,
        verdict=verdict,
        rows=tuple(scored),
        per_prompt=per_prompt,
    )


def calibrate(labels: Path, judge: str, *, samples: int = 3) -> CalibrationResult:
    """Load the labels, score them with ``judge`` and summarise the agreement."""
    if samples < 1:
        raise ConfigError(f"--samples must be at least 1, got {samples}")
    rows = load_labels(labels)
    scored = asyncio.run(score_rows(rows, judge, samples=samples))
    return summarise(
        scored, judge=judge, labels=str(labels), samples=samples, prompts=judge_prompts(rows)
    )


def judge_prompts(rows: Sequence[LabelRow]) -> dict[str, str]:
    """Each metric's judge prompt: the active version the registry renders for it."""
    from app.errors import PromptError
    from app.eval.scoring.table import judge_table
    from app.generation.registry import load_registry

    table = judge_table()
    registry = load_registry()
    out = {}
    for metric in sorted({r.metric for r in rows}):
        prompt_id = table[metric].prompt
        try:
            out[metric] = registry.get(prompt_id).qualified
        except PromptError:  # render will say what is wrong; the id still names the prompt
            out[metric] = prompt_id
    return out
