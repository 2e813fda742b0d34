"""SIGKILL ``rag eval run`` in the middle of a case, resume it, and count what was paid.

:mod:`test_resume` kills the runner between cases. Here it dies *inside* one: the case's
candidate answer (and perhaps some judge samples) were answered by the provider, but the
case was not checkpointed yet. ``--resume RUN_ID`` runs that case again, and every call
it had already paid for must come from the response cache (stored before
``Engine.generate`` returns), not from the provider a second time.

Candidate and judge are ``openai:<model>@<url>`` of one :class:`FakeLLMServer`, and
``--concurrency 1`` keeps exactly one request in flight. The server SIGKILLs the runner
when request ``N + 1`` arrives and never answers it while the runner lives, so exactly
``N`` requests were answered — and, one in flight at a time, all ``N`` were back in the
runner (and in its cache) before request ``N + 1`` could be sent. ``N`` is taken from the
request sequence of an uninterrupted run (own cache) so that it falls inside a case; the
killed run's checkpoint proves it did (a case with paid calls is not in it).

Asserted: the requests answered for the killed and the resumed processes together equal
those of the uninterrupted run as a multiset of request bodies (none paid twice, none
missing; the ``n`` samples of a judge metric share one body, hence a multiset), and the
final report equals the uninterrupted one case for case (latency excluded), its
``cost_usd`` included: a cached call reports what it is worth, so the cut case costs the
same as in the uninterrupted run (this test found the bug where a hit reported $0.00).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.paths import PACKAGE_DIR
from tests.support.fake_llm_server import FakeLLMServer
from tests.unit.eval.test_resume import cases, rag, report_of

CANDIDATE = "qwen2-7b"  # not in prices.toml: its cost is unknown (None), not zero
JUDGE = "gpt-4o"
LIMIT = 3  # mini-001 … mini-003: each one candidate call + 3 judge metrics x 2 samples
SAMPLES = 2

# Where to kill: once the nth request (1-based) to <model> for case <i> (0-based, by id)
# was answered. --concurrency 1 works on 2 cases at once (2 workers), one request in
# flight: c1 answer, c2 answer, c1 judges x6, c2 judges x6, c3 answer, c3 judges x6.
KILL_POINTS = {
    # both cases in progress have a paid answer, no judge call yet
    "two-answers-no-judge": (CANDIDATE, 1, 1),
    # case 1 done; case 2's answer and both samples of its first judge metric paid
    "answer-and-two-judge-samples": (JUDGE, 1, 2),
    # cases 1-2 done; case 3's answer and sample 0 (not sample 1) of a judge metric paid
    "between-two-samples-of-a-metric": (JUDGE, 2, 1),
}


class Provider:
    """The fake provider's answers; records every answered body, kills on request."""

    def __init__(self) -> None:
        self.answered: list[str] = []  # canonical JSON of each answered request body
        self.kill_pid: int | None = None
        self.kill_after = 0  # answer this many requests, SIGKILL the runner at the next
        self.reaped = threading.Event()  # set once the killed runner was waited for
        self._lock = threading.Lock()

    def __call__(self, body: Any) -> str:
        with self._lock:
            killing = self.kill_pid is not None and len(self.answered) >= self.kill_after
            if killing:
                assert self.kill_pid is not None
                os.kill(self.kill_pid, signal.SIGKILL)
                self.kill_pid = None
            else:
                self.answered.append(json.dumps(body, sort_keys=True, ensure_ascii=False))
        if killing:  # never answer this request while the runner could still read it
            self.reaped.wait(timeout=60)
            return "never read"
        if body["model"] == JUDGE:
            return '{"score": 4, "reasoning": "supported"}'
        return "根据参考资料，答案见文档 [1]。"


@dataclass
class Scenario:
    where: str
    questions: list[str]  # of the LIMIT cases, in id order
    ids: list[str]
    reference: dict[str, Any]  # report of the uninterrupted run
    expected: list[str]  # bodies answered for the uninterrupted run
    kill_after: int
    killed: list[str]  # bodies answered for the killed run
    checkpointed: set[str]  # case ids in the killed run's checkpoint
    run_id: str
    resumed: dict[str, Any]  # report of the resumed run
    resumed_calls: list[str]  # bodies answered for the resumed run

    def case_of(self, body: str) -> str:
        """Id of the case a request body belongs to (its question appears in it)."""
        found = [cid for cid, q in zip(self.ids, self.questions, strict=True) if q in body]
        assert len(found) == 1, body[:2000]
        return found[0]


def position(bodies: list[str], scenario: Scenario, model: str, case: int, nth: int) -> int:
    """1-based position in ``bodies`` of the ``nth`` request to ``model`` for ``case``."""
    seen = 0
    for i, body in enumerate(bodies, 1):
        if json.loads(body)["model"] == model and scenario.case_of(body) == scenario.ids[case]:
            seen += 1
            if seen == nth:
                return i
    raise AssertionError(f"no request #{nth} to {model} for case {scenario.ids[case]}")


def make_root(root: Path) -> Path:
    """The ``eval_root`` layout (tests/unit/eval/conftest.py), module-scoped."""
    here = Path(__file__).parent
    (root / "tests/eval/datasets").mkdir(parents=True)
    (root / "tests/eval/kb").mkdir(parents=True)
    (root / "reports").mkdir()
    shutil.copy(here / "mini_v1.0.jsonl", root / "tests/eval/datasets/mini_v1.0.jsonl")
    (root / "tests/eval/kb/sample").symlink_to(PACKAGE_DIR.parent / "tests/eval/kb/sample")
    (root / "reports/report.schema.json").symlink_to(
        PACKAGE_DIR.parent / "reports/report.schema.json"
    )
    return root


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeLLMServer, Provider]]:
    provider = Provider()
    with FakeLLMServer(responder=provider) as srv:
        try:
            yield srv, provider
        finally:
            provider.reaped.set()


@dataclass
class Reference:
    root: Path
    args: list[str]
    rows: list[dict[str, Any]]  # the LIMIT cases, in id order
    report: dict[str, Any]
    expected: list[str]  # bodies answered for it


@pytest.fixture(scope="module")
def reference(
    server: tuple[FakeLLMServer, Provider], tmp_path_factory: pytest.TempPathFactory
) -> Reference:
    """The uninterrupted reference run (its own cache), once for every kill point: the same
    command on the same files, so the same report and request bodies each time."""
    srv, provider = server
    tmp = tmp_path_factory.mktemp("reference")
    root = make_root(tmp / "repo")
    rows = [
        json.loads(line)
        for line in (root / "tests/eval/datasets/mini_v1.0.jsonl").read_text("utf-8").splitlines()
        if line.strip()
    ]
    rows = sorted(rows, key=lambda r: r["id"])[:LIMIT]
    url = srv.openai_base_url
    args = [
        "eval",
        "run",
        "--suite",
        "mini",
        "--model",
        f"openai:{CANDIDATE}@{url}",
        "--judge",
        f"openai:{JUDGE}@{url}",
        "--judge-samples",
        str(SAMPLES),
        "--limit",
        str(LIMIT),
        "--concurrency",
        "1",
        "--quiet",
        "--out",
        str(root / "reports"),
    ]
    provider.answered, provider.kill_pid = [], None
    proc = rag(args, root, tmp / "cache-a")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), err
    expected = list(provider.answered)
    assert len(expected) == LIMIT * (1 + 3 * SAMPLES), [json.loads(b)["model"] for b in expected]
    return Reference(root, args, rows, report_of(out), expected)


@pytest.fixture(scope="module", params=list(KILL_POINTS))
def scenario(
    request: pytest.FixtureRequest,
    server: tuple[FakeLLMServer, Provider],
    reference: Reference,
    tmp_path_factory: pytest.TempPathFactory,
) -> Scenario:
    """Killed run and resumed run — once per kill point for both tests — against the shared
    uninterrupted reference run."""
    where: str = request.param
    _srv, provider = server
    tmp = tmp_path_factory.mktemp(where)
    root, args, rows = reference.root, reference.args, reference.rows
    out_dir = str(root / "reports")

    s = Scenario(
        where=where,
        questions=[r["question"] for r in rows],
        ids=[r["id"] for r in rows],
        reference=reference.report,
        expected=reference.expected,
        kill_after=0,
        killed=[],
        checkpointed=set(),
        run_id="",
        resumed={},
        resumed_calls=[],
    )
    s.kill_after = position(s.expected, s, *KILL_POINTS[where])

    # the same run in a fresh cache, SIGKILLed when request kill_after + 1 arrives
    provider.answered, provider.kill_after = [], s.kill_after
    provider.reaped.clear()
    proc = rag(args, root, tmp / "cache-b")
    provider.kill_pid = proc.pid
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        provider.reaped.set()
    assert proc.returncode == -signal.SIGKILL, (out, err)
    run_id = re.search(r"run (\S+)", err)
    assert run_id, err
    s.run_id = run_id.group(1)
    s.killed = list(provider.answered)
    db = sqlite3.connect(tmp / "cache-b" / "runs" / f"{s.run_id}.sqlite3")
    try:
        s.checkpointed = {row[0] for row in db.execute("SELECT case_id FROM cases")}
    finally:
        db.close()

    # --resume RUN_ID in the killed run's cache
    proc = rag(
        ["eval", "run", "--suite", "mini", "--resume", s.run_id, "--quiet", "--out", out_dir],
        root,
        tmp / "cache-b",
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), err
    s.resumed = report_of(out)
    s.resumed_calls = provider.answered[len(s.killed) :]
    return s


def differences(want: dict[str, Any], have: dict[str, Any]) -> dict[str, Any]:
    """{case id: {metric or "answer": (uninterrupted, resumed)}} where they differ."""
    diff: dict[str, Any] = {}
    for cid in sorted(set(want) | set(have)):
        (wm, wa), (hm, ha) = want.get(cid, ({}, None)), have.get(cid, ({}, None))
        d = {m: (wm.get(m), hm.get(m)) for m in sorted(set(wm) | set(hm)) if wm.get(m) != hm.get(m)}
        if wa != ha:
            d["answer"] = (wa, ha)
        if d:
            diff[cid] = d
    return diff


def without_cost(report_cases: dict[str, Any]) -> dict[str, Any]:
    return {
        cid: ({m: v for m, v in metrics.items() if m != "cost_usd"}, answer)
        for cid, (metrics, answer) in report_cases.items()
    }


@pytest.mark.slow
def test_kill_mid_case_then_resume_pays_no_call_twice(scenario: Scenario) -> None:
    s = scenario
    assert len(s.killed) == s.kill_after

    # the kill fell inside a case: a case with paid calls is not in the checkpoint
    unfinished = {s.case_of(b) for b in s.killed} - s.checkpointed
    assert unfinished, (s.where, s.kill_after, sorted(s.checkpointed))

    # (a) across both processes nothing answered twice, nothing missing
    expected, got = Counter(s.expected), Counter(s.killed) + Counter(s.resumed_calls)
    paid_twice = [
        (s.case_of(b), json.loads(b)["model"], f"{n} extra", b[:600])
        for b, n in (got - expected).items()
    ]
    missing = [(s.case_of(b), b[:600]) for b in expected - got]
    assert not paid_twice and not missing, (s.where, s.kill_after, paid_twice, missing)
    assert len(s.killed) + len(s.resumed_calls) == len(s.expected)

    # the totals count every process of the run (issue 12: they counted only the last one):
    # the resumed process's calls plus what the killed one recorded after its last case
    # (calls of the case the kill interrupted are not recorded); it re-used that case's calls
    engine = s.resumed["totals"]["engine"]
    assert len(s.resumed_calls) <= engine["completions"] <= len(s.expected), engine
    assert engine["completions"] <= engine["calls"] <= len(s.expected) + 8, engine
    assert engine["cache_hits"] >= len(unfinished), engine

    # (b) the final report equals the uninterrupted one (cost_usd: the test below)
    assert s.resumed["partial"] is False
    assert s.resumed["meta"]["resumed_from"] == s.run_id
    want, have = without_cost(cases(s.reference)), without_cost(cases(s.resumed))
    assert have == want, (s.where, differences(want, have))


@pytest.mark.slow
def test_kill_mid_case_then_resume_reports_the_uninterrupted_cost(scenario: Scenario) -> None:
    want, have = cases(scenario.reference), cases(scenario.resumed)
    assert have == want, (scenario.where, differences(want, have))
