"""Planted changes against a local OpenAI-compatible server, on the smoke suite's size.

One :class:`~tests.support.fake_llm_server.FakeLLMServer` answers as the candidate
(``openai:qwen2-7b@<url>``, a model the prompt lists) and the judge (``openai:gpt-4o@<url>``),
with behaviour planted per case: the base run answers every question with a citation and
the judge gives 4. Then

* an **unchanged rerun** (the same server, the response cache warm) must show no ❌, no
  "unverified", and no latency comparison (every call was cached);
* a **planted run** changes, on disjoint sets of four of the 43 cases, the answer to the
  prompt's rejection (refusal rate +9.3 pp), a citation number to one that does not exist
  (citation accuracy −9.3 pp) and the answer to a worse one the judge scores 2 (each judge
  score −0.19): every row that moved by at least its margin must not be ✅.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.eval.compare import compare_files
from app.eval.scoring.thresholds import load_margins
from app.paths import PACKAGE_DIR
from tests.support.fake_llm_server import FakeLLMServer

pytestmark = pytest.mark.slow

CANDIDATE, JUDGE = "qwen2-7b", "gpt-4o"
REJECTION = "抱歉，根据现有资料无法确定该问题的答案，建议联系相关部门确认。"  # kb_qa_v2's
WORSE = "（摘要版，未逐条核对）"
SMOKE = PACKAGE_DIR.parent / "tests/eval/datasets/smoke_v1.0.jsonl"


@dataclass
class Planted:
    refuse: set[str] = field(default_factory=set)  # questions answered with the rejection
    bad_citation: set[str] = field(default_factory=set)  # questions citing [9]
    worse: set[str] = field(default_factory=set)  # questions answered worse (judge: 2)

    def __call__(self, body: Any) -> str:
        text = json.dumps(body, ensure_ascii=False)
        if body["model"] == JUDGE:
            score = 2 if WORSE in text else 4
            return json.dumps({"score": score, "reasoning": "planted"})
        question = next((q for q in self.all() if q in text), None)
        if question in self.refuse:
            return REJECTION
        if question in self.bad_citation:
            return "根据参考资料，答案见文档 [9]。"
        if question in self.worse:
            return "根据参考资料，答案见文档 [1]。" + WORSE
        return "根据参考资料，答案见文档 [1]。"

    def all(self) -> set[str]:
        return self.refuse | self.bad_citation | self.worse


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    tmp = tmp_path_factory.mktemp("planted")
    planted = Planted()
    with FakeLLMServer(responder=planted) as srv:
        url = srv.openai_base_url

        def run(name: str, *extra: str) -> Path:
            env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
            env.update(RAG_CACHE_DIR=str(tmp / "cache"), RAG_LOG_DIR=str(tmp / "logs"))
            args = ["eval", "run", "--suite", "smoke", "--model", f"openai:{CANDIDATE}@{url}"]
            args += ["--judge", f"openai:{JUDGE}@{url}", "--judge-samples", "1", "--quiet"]
            args += ["--out", str(tmp / name), *extra]
            res = subprocess.run(
                [sys.executable, "-m", "app", *args],
                cwd=PACKAGE_DIR.parent,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert res.returncode in (0, 1), res.stderr[-3000:]
            found = re.search(r"report: (\S+\.json)", res.stdout)
            assert found, res.stdout[-2000:] + res.stderr[-2000:]
            return Path(found.group(1))

        base = run("base")
        rerun = run("rerun")  # the cache is warm: every call replayed
        questions = {
            (row := json.loads(line))["id"]: row["question"]
            for line in SMOKE.read_text(encoding="utf-8").splitlines()
            if line.strip()
        }
        cases = json.loads(base.read_text(encoding="utf-8"))["cases"]

        def value(case: dict[str, Any], metric: str) -> Any:
            return (case["metrics"].get(metric) or {}).get("value")

        plain = [c for c in cases if not c["refused"] and not c["expected_refusal"]]
        cited = [c for c in plain if value(c, "citation_accuracy") == 1.0]
        planted.bad_citation = {questions[c["id"]] for c in cited[:4]}
        rest = [c for c in plain if questions[c["id"]] not in planted.bad_citation]
        planted.refuse = {questions[c["id"]] for c in rest[:4]}
        planted.worse = {questions[c["id"]] for c in rest[4:8] if value(c, "faithfulness") == 4}
        assert len(planted.bad_citation) == len(planted.refuse) == len(planted.worse) == 4
        new = run("planted", "--no-cache")
        yield {"base": base, "rerun": rerun, "planted": new}


def test_an_unchanged_rerun_is_never_red(runs: dict[str, Path]) -> None:
    cmp = compare_files(runs["base"], runs["rerun"])
    assert cmp.answers is not None and cmp.answers.changed == ()
    assert cmp.unverified is None  # a model answered and judged
    assert not [r for r in cmp.rows if r.symbol == "❌"], [(r.metric, r.verdict) for r in cmp.rows]
    assert {r.verdict for r in cmp.rows} <= {"no_change", "no_data"}
    latency = next(r for r in cmp.rows if r.metric == "latency_s")
    assert latency.verdict == "no_data" and "cached" in latency.reasons[0]


def test_a_planted_change_of_at_least_the_margin_is_never_green(runs: dict[str, Path]) -> None:
    cmp = compare_files(runs["base"], runs["planted"])
    margins = load_margins()
    assert cmp.answers is not None and len(cmp.answers.changed) == 12
    assert cmp.unverified is None and "not_measured" not in {r.verdict for r in cmp.rows}
    rows = {r.metric: r for r in cmp.rows}
    moved = {  # the costs move with the machine's load, not with the plants: left out
        m: r
        for m, r in rows.items()
        if m not in ("latency_s", "tokens", "cost_usd")
        and r.delta is not None
        and margins.get(m, 0.0) > 0
        and abs(r.delta) >= margins[m]
    }
    # the plants moved what they were planted to move, by at least the margin
    assert {"refusal_rate", "citation_accuracy", "faithfulness", "correctness"} <= set(moved)
    green = {m: (r.verdict, r.delta, r.ci95) for m, r in moved.items() if r.symbol == "✅"}
    assert green == {}
    assert rows["citation_accuracy"].delta == pytest.approx(-4 / rows["citation_accuracy"].n)
