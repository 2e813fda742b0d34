"""The run keeps each finished case as a row of a DigestTable (numbers and codes), not as a
CaseDigest of Python objects: the summary computed from it is the one computed by hand from
the digests, and a row costs a few hundred bytes."""

from __future__ import annotations

import gc
import random
import statistics
import tracemalloc
from collections import defaultdict
from collections.abc import Iterator

import pytest

from app.eval.report.records import BadCase, BadReason
from app.eval.report.summary import CaseDigest, DigestTable, summary_parts
from app.eval.scoring.table import specs


def _digests(n: int, seed: int = 1) -> list[CaseDigest]:
    out = list(_make(n, random.Random(seed)))
    random.Random(seed).shuffle(out)  # finished in any order
    return out


def _make(n: int, rng: random.Random) -> Iterator[CaseDigest]:
    names = list(specs())
    judge = [m for m, s in specs().items() if s.kind == "judge"]
    for i in range(n):
        scores: dict[str, tuple[float | None, int, bool]] = {}
        for name in names:
            roll = rng.random()
            if roll < 0.1:
                continue  # not scored for this case
            value = None if roll < 0.25 else round(rng.uniform(0, 5), 3)
            errs = 1 if value is None and roll < 0.18 else 0
            scores[name] = (value, errs, name in judge)
        bad = (
            BadCase(
                id=f"c{i:05d}",
                reasons=[BadReason(kind="error", hard=True, message=f"evaluation error {i}")],
            )
            if i % 3 == 0
            else None
        )
        yield CaseDigest(
            id=f"c{i:05d}",
            tags=tuple(rng.sample(["hr", "it", "finance", "multi-turn"], rng.randint(1, 2))),
            difficulty=rng.choice(["easy", "hard", None]),
            scores=scores,
            cost_usd=rng.random() / 1000,
            judge_costs=tuple(rng.random() / 1000 for _ in range(rng.randint(0, 2))),
            has_errors=i % 7 == 0,
            refusal_cell=rng.choice(["true_answer", "false_refusal", None]),
            bad=bad,
            prompt_versions=frozenset({f"qa_v{i % 2 + 1}"}),
            outcome=rng.choice(["correct", "retrieval_miss"]),
        )


def test_the_summary_is_the_one_computed_by_hand() -> None:
    digests = _digests(300)
    parts = summary_parts(DigestTable.of(digests), specs(), seed=3)
    ordered = sorted(digests, key=lambda d: d.id)
    for name in specs():
        present = [d.scores[name] for d in ordered if name in d.scores]
        values = [v for v, _, _ in present if v is not None]
        dist = parts.summary[name]
        assert dist.n == len(values)
        assert dist.n_null == len(present) - len(values)
        assert dist.n_errors == sum(1 for v, e, _ in present if v is None and e > 0)
        assert dist.mean == pytest.approx(statistics.fmean(values))
    by_tag: dict[str, list[CaseDigest]] = defaultdict(list)
    for d in ordered:
        for tag in d.tags:
            by_tag[tag].append(d)
    assert sorted(parts.breakdowns.by_tag) == sorted(by_tag)
    for tag, group in by_tag.items():
        got = parts.breakdowns.by_tag[tag]
        assert got.cases == len(group)
        vals = [d.scores["faithfulness"][0] for d in group if "faithfulness" in d.scores]
        defined = [v for v in vals if v is not None]
        assert got.metrics["faithfulness"].n == len(defined)
        assert got.metrics["faithfulness"].mean == pytest.approx(statistics.fmean(defined))
    assert [b.id for b in parts.bad_cases] == [d.id for d in ordered if d.bad is not None]
    assert parts.cases_done == 300
    assert parts.cases_with_errors == sum(1 for d in digests if d.has_errors)
    assert parts.cost_usd == pytest.approx(sum(d.cost_usd for d in digests))
    assert parts.judge_cost_usd == pytest.approx(sum(sum(d.judge_costs) for d in digests))
    assert parts.prompt_versions == {"qa_v1", "qa_v2"}
    assert parts.refusal_confusion.false_refusal == sum(
        1 for d in digests if d.refusal_cell == "false_refusal"
    )
    assert parts.outcomes["retrieval_miss"] == sum(
        1 for d in digests if d.outcome == "retrieval_miss"
    )
    assert parts.judge_errors == sum(
        1
        for d in digests
        for name, (_, errs, sampled) in d.scores.items()
        if specs()[name].kind == "judge" and errs > 0 and sampled
    )


def test_a_row_reads_back_as_its_digest_and_a_second_one_replaces_it() -> None:
    first, second = _digests(2, seed=5)
    table = DigestTable.of([first])
    assert table[first.id] == first
    replaced = CaseDigest(**{**{f: getattr(second, f) for f in second.__slots__}, "id": first.id})
    table[first.id] = replaced
    assert len(table) == 1 and table[first.id] == replaced
    assert table.cost(first.id) == replaced.cost_usd


def _held(n: int) -> int:
    """What the table holds after ``n`` digests, each made as it is added (as a run's
    finished cases come) and let go."""
    gc.collect()
    tracemalloc.start()
    try:
        table = DigestTable.of(_make(n, random.Random(2)))
        held = tracemalloc.get_traced_memory()[0]
        assert len(table) == n
        return held
    finally:
        tracemalloc.stop()


def test_a_row_costs_a_few_hundred_bytes_not_a_digest() -> None:
    """A CaseDigest of this shape holds ≈ 2–3 KB of Python objects; a row, its numbers."""
    per_row = (_held(1_200) - _held(200)) / 1_000
    assert per_row < 700, per_row
