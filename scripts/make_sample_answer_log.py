"""Write the shipped sample answer log ``tests/data/answer_log/answers_sample.jsonl``.

Every answer line is a real answer of the pipeline (``offline:extractive`` on the sample KB,
prompt ``system/kb_qa``), logged by the pipeline's own answer logger — nothing is edited,
except two fields marked in the record's ``synthetic`` list so the rules they feed can be
exercised (an offline answer is never slow and never cites out of range):

* one answer's ``latency_ms`` is set to 12,500 (``high_latency``);
* one answer's ``invalid_citations`` is set to ``[7]`` (``citation_out_of_range``).

The feedback lines are synthetic user ratings (three users 👎 on two phrasings of the
sick-leave question within a week; one 👎 taken back by a 👍; one 👍), written with the real
``record_feedback`` and then dated, so ``rag datasets mine`` and ``rag shadow`` have a log to
read in tests and in the README. Re-running writes a NEW log (trace ids are random): pass
``--out`` to write elsewhere; the default refuses to overwrite the shipped file.

    python scripts/make_sample_answer_log.py [--out PATH] [--force]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_OUT = ROOT / "tests" / "data" / "answer_log" / "answers_sample.jsonl"

# (question, acl, history) — colloquial production-style questions, not the suites' wording
TRAFFIC: list[tuple[str, list[str], list[dict[str, str]]]] = [
    ("年假一年能休几天啊", ["employee"], []),
    ("请病假要开证明吗", ["employee"], []),
    ("病假一年有几天带薪的", ["employee"], []),
    ("病假一年有几天带薪", ["employee"], []),
    ("出差住酒店一晚最多报多少钱", ["employee"], []),
    ("报销单要谁批", ["employee"], []),
    ("VPN老是断线怎么回事", ["employee"], []),
    ("公司食堂几点开饭", ["employee"], []),
    ("下周团建去哪里", ["employee"], []),
    ("How much does the Nebula Starter plan cost per month?", ["public"], []),
    ("Does Nebula Search support SSO login?", ["public"], []),
    ("P6 工资大概多少", ["employee"], []),
    ("P6 工资大概多少", ["hr"], []),
    (
        "那要提前几天申请？",
        ["employee"],
        [
            {"role": "user", "content": "年假一年能休几天？"},
            {"role": "assistant", "content": "工作满 1 年不满 10 年的员工每年 5 天年假。"},
        ],
    ),
    ("备用金能借多少", ["employee"], []),
    ("星河科技哪年成立的", ["public"], []),
]
SLOW_INDEX = 4  # the hotel question: latency set to 12,500 ms (synthetic)
BAD_CITE_INDEX = 5  # the approval question: invalid_citations set to [7] (synthetic)


async def _answers(log_dir: Path) -> list[dict[str, object]]:
    os.environ["RAG_LOG_DIR"] = str(log_dir)
    import app.baselines  # noqa: F401  (registers offline:extractive)
    from app.generation.pipeline.config import PipelineConfig
    from app.generation.pipeline.generator import Pipeline
    from app.llm.engine import Engine, EngineConfig

    engine = Engine(EngineConfig(cache=False))
    try:
        pipe = Pipeline(PipelineConfig(model="offline:extractive", log_answers=True), engine)
        for question, acl, history in TRAFFIC:
            await pipe.answer(question, history, acl)
    finally:
        await engine.aclose()
    lines = (log_dir / "answers.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def build() -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as tmp:
        records = asyncio.run(_answers(Path(tmp)))
        from app.generation.pipeline.answer_log import record_feedback

        answers = [r for r in records if r.get("event") == "answer"]
        if len(answers) != len(TRAFFIC):
            raise SystemExit(f"expected {len(TRAFFIC)} answers, the log has {len(answers)}")
        answers[SLOW_INDEX]["latency_ms"] = 12500.0
        answers[SLOW_INDEX]["synthetic"] = ["latency_ms"]
        answers[BAD_CITE_INDEX]["invalid_citations"] = [7]
        answers[BAD_CITE_INDEX]["synthetic"] = ["invalid_citations"]
        # three users 👎 two phrasings of the sick-leave question within a week
        sick_a, sick_b = answers[2]["trace_id"], answers[3]["trace_id"]
        ratings = [
            (sick_a, "u-wang", "down", "2026-11-23T09:00:00Z"),
            (sick_b, "u-li", "down", "2026-11-25T14:30:00Z"),
            (sick_a, "u-zhao", "down", "2026-11-28T08:15:00Z"),
            # a 👎 taken back: it does not count
            (answers[0]["trace_id"], "u-wang", "down", "2026-11-26T10:00:00Z"),
            (answers[0]["trace_id"], "u-wang", "up", "2026-11-26T10:05:00Z"),
            (answers[9]["trace_id"], "u-smith", "up", "2026-11-27T16:00:00Z"),
        ]
        feedback: list[dict[str, object]] = []
        for trace_id, user, rating, ts in ratings:
            rec = record_feedback(str(trace_id), user, rating)
            rec["ts"] = ts  # dated so the 7-day window is fixed, not "now"
            feedback.append(rec)
        return [*answers, *feedback]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--force", action="store_true", help="Overwrite an existing file.")
    args = ap.parse_args()
    if args.out.exists() and not args.force:
        print(f"{args.out} exists: pass --force to overwrite, or --out elsewhere", file=sys.stderr)
        return 2
    records = build()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records)
    args.out.write_text(body, encoding="utf-8")
    print(f"wrote {len(records)} records to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
