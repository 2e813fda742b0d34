"""One judge table: the runner, preflight, the offline judge, calibration and thresholds
read it; ``--metrics`` selects what runs; a new judge metric is a prompt module and one entry."""

from __future__ import annotations

import importlib
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from app.baselines import reference_judge
from app.cli import main
from app.errors import ConfigError, DatasetError
from app.eval.run.runner import RunConfig, run, run_sync
from app.eval.scoring.calibrate import load_labels
from app.eval.scoring.registry import REGISTRY, JudgeInput, forget, judge_metric
from app.eval.scoring.table import judge_table
from app.generation.registry import load_registry
from app.paths import PACKAGE_DIR
from tests.support.recording_engine import RecordingEngine as Recording

MINI_CASES = 5


async def _run(config: RunConfig) -> tuple[dict[str, object], Recording]:
    async with Recording() as engine:
        outcome = await run(config, engine=engine, write=False)
    return outcome.report.model_dump(mode="json"), engine


def test_the_table_is_the_one_list_of_judge_metrics() -> None:
    table = judge_table()
    # the built-in judges, in registration order (a new judge metric may join them)
    builtin = [n for n in table if n in {"faithfulness", "relevance", "correctness"}]
    assert builtin == ["faithfulness", "relevance", "correctness"]
    registry = load_registry()
    for name, entry in table.items():
        assert entry.spec.kind == "judge" and entry.prompt == f"judge/{name}"
        # one entry: the metric table's spec and function are the same row's
        assert REGISTRY[name].judge is entry and REGISTRY[name].spec is entry.spec
        # the variables builder gives exactly the prompt's declared variables
        built = entry.variables(JudgeInput("q", "a", "c", "g"))
        assert set(built) == set(registry.get(entry.prompt).variables)
    # the offline judge's rules are the rows' own, handed over through its seam: no copy
    assert dict(reference_judge.rules()) == {n: e.offline for n, e in table.items()}
    # no `if metric == "…"` chain is left anywhere in app/
    chains = [
        f"{p.relative_to(PACKAGE_DIR)}:{n}"
        for p in PACKAGE_DIR.rglob("*.py")
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bmetric\s*==\s*['\"]", line)
    ]
    assert chains == []


def test_calibration_labels_are_checked_against_the_table(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"id": "a", "question": "q", "candidate": "c", "golden_answer": "g", '
        '"metric": "fluency", "human_score": 3, "annotator": "x"}\n',
        encoding="utf-8",
    )
    with pytest.raises(DatasetError) as exc:
        load_labels(path)
    assert "labels.jsonl:1: field metric" in str(exc.value)
    assert "unknown judge metric 'fluency'; known: " in str(exc.value)
    known = str(exc.value).split("known: ", 1)[1]
    assert all(name in known for name in ("faithfulness", "relevance", "correctness"))


async def test_metrics_correctness_with_one_sample_is_one_judge_call_per_case(
    eval_root: Path,
) -> None:
    config = RunConfig(suite="mini", cache=False, metrics=("correctness",), judge_samples=1)
    report, engine = await _run(config)
    assert engine.judge_metrics() == Counter({"correctness": MINI_CASES})
    cases = report["cases"]
    assert isinstance(cases, list) and len(cases) == MINI_CASES
    assert all(set(c["metrics"]) == {"correctness"} for c in cases)
    verdicts = report["verdicts"]
    assert isinstance(verdicts, dict)
    assert verdicts["correctness"]["verdict"] in ("pass", "fail")
    for name in ("faithfulness", "relevance", "hit_rate", "acl_leak"):
        assert verdicts[name]["verdict"] == "not_measured", name
    assert report["status"] == "fail"  # an unmeasured gate never passes


async def test_metrics_deterministic_makes_no_judge_call(eval_root: Path) -> None:
    report, engine = await _run(RunConfig(suite="mini", cache=False, metrics=("deterministic",)))
    assert engine.judge_metrics() == Counter()
    verdicts = report["verdicts"]
    assert isinstance(verdicts, dict)
    assert verdicts["faithfulness"]["verdict"] == "not_measured"
    assert verdicts["acl_leak"]["verdict"] == "pass"
    # the default is every metric: 3 judge metrics per case, plus the rewrite equivalence
    # (correctness) judge for the one rewrite case whose rewrite did not match; the offline
    # judge is deterministic, so each is asked once and its 3 samples repeat that verdict
    full, everything = await _run(RunConfig(suite="mini", cache=False))
    counts = everything.judge_metrics()
    assert counts["faithfulness"] == counts["relevance"] == MINI_CASES
    assert counts["correctness"] in (MINI_CASES, MINI_CASES + 1)
    cases = full["cases"]
    assert isinstance(cases, list) and len(cases) == MINI_CASES
    for case in cases:
        for name in ("faithfulness", "relevance", "correctness"):
            score = case["metrics"][name]
            assert len(score["samples"]) == 3 and len(set(score["samples"])) == 1, score
            assert score["spread"] == 0.0 and score["value"] == score["samples"][0]


def _rag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_cli_metrics_unknown_name_and_not_measured_summary(
    eval_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = _rag(["eval", "run", "--suite", "mini", "--metrics", "corectness"], capsys)
    assert rc == 2 and "unknown metric(s) 'corectness'" in err
    assert "deterministic" in err and "correctness" in err and "hit_rate" in err
    rc, out, err = _rag(
        ["eval", "run", "--suite", "mini", "--metrics", "correctness,faithfulness", "--quiet"],
        capsys,
    )
    assert rc == 1, out + err
    flat = " ".join(out.split())
    assert "NOT MEASURED: hit_rate" in flat and "their gates cannot pass" in flat
    assert "faithfulness" not in flat.split("NOT MEASURED:")[1].split("—")[0]
    rc, out, err = _rag(
        ["eval", "run", "--suite", "mini", "--metrics", "deterministic", "--gate", "red-lines"],
        capsys,
    )
    assert rc == 0, out + err  # acl_leak (the red line) was measured and is 0


CONCISION_PROMPT = '''"""
Prompt: Judge·简洁度
版本: v1
用途: LLM-as-judge 评估候选答案是否简洁（1-5 分，JSON 输出）
适用模型: claude-opus-4-7, claude-sonnet-4-6, gpt-4o*
创建人: 测试 (2026-12-01)
变更摘要:
- v1 (2026-12-01): 初版
"""

VERSION = "concision_v1"
APPLICABLE_MODELS = ["claude-opus-4-7", "claude-sonnet-4-6", "gpt-4o*"]
VARIABLES = ["candidate"]
RESPONSE_FORMAT = "json"

SYSTEM_PROMPT = None

USER_TEMPLATE = """请评估候选答案是否简洁。
<候选答案>
{candidate}
</候选答案>
请按以下 JSON 格式输出，不要有任何额外文字：
{{"score": <1-5>, "reasoning": "<一句话>"}}
"""

TEST_FIXTURES = [
    {"candidate": "一线城市酒店上限 600 元/晚 [1]。", "expected_phrases": ['"score"']},
    {"candidate": "根据现有资料无法确定。", "expected_phrases": ['"reasoning"']},
    {"candidate": "年假 5 天 [1]。", "expected_phrases": ['"score"']},
]
'''


async def test_a_new_judge_metric_end_to_end_offline_in_process(
    eval_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The contributor's change: (1) the prompt module, (2) one registered entry (here, in
    this test); prompts.lock is generated. (test_recipe_judge_metric.py does it on a copy of
    the repository, from the docs page.)"""
    shipped = PACKAGE_DIR / "generation" / "prompts"
    root = tmp_path / "prompts"
    shutil.copytree(shipped, root, ignore=shutil.ignore_patterns("__pycache__"))
    (root / "judge" / "concision_v1.py").write_text(CONCISION_PROMPT, encoding="utf-8")  # 1
    rc, out, _ = _rag(["prompts", "lock", "--root", str(root)], capsys)  # generated
    assert rc == 0 and "locked judge/concision_v1" in out
    rc, out, _ = _rag(["prompts", "check", "--root", str(root)], capsys)
    assert rc == 0 and "0 violation" not in out and ": ok" in out, out  # the tree is clean
    changed = sorted(
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and (
            not (shipped / p.relative_to(root)).exists()
            or (shipped / p.relative_to(root)).read_bytes() != p.read_bytes()
        )
    )
    assert changed == ["judge/concision_v1.py", "prompts.lock"]  # no releases.toml entry
    monkeypatch.setattr(
        importlib.import_module("app.generation.registry"), "default_root", lambda: root
    )

    def concision_rule(v: dict[str, str], meta: dict[str, str]) -> dict[str, object]:
        n = len(v.get("candidate", ""))
        return {"score": 5 if n <= 40 else 2, "reasoning": f"{n} characters"}

    @judge_metric(  # 2
        "concision",
        prompt="judge/concision",
        offline=concision_rule,  # type: ignore[arg-type]
        description="judge/concision: the answer is short",
    )
    def concision(j: JudgeInput) -> dict[str, str]:
        return {"candidate": j.candidate}

    try:
        config = RunConfig(suite="mini", cache=False, metrics=("concision",), judge_samples=2)
        report, engine = await _run(config)
    finally:
        forget("concision")
    # the offline judge is deterministic: asked once per case, its 2 samples one verdict
    assert engine.judge_metrics() == Counter({"concision": MINI_CASES})
    meta = report["meta"]
    assert isinstance(meta, dict)
    assert meta["judge"]["prompts"]["judge/concision"]["version"] == "judge/concision_v1"
    cases = report["cases"]
    assert isinstance(cases, list)
    for case in cases:
        # the expected score from the rule's definition, on the answer the report shows
        expected = 5.0 if len(case["answer"]) <= 40 else 2.0
        assert case["metrics"]["concision"]["value"] == expected, case["id"]
        assert case["metrics"]["concision"]["samples"] == [expected, expected], case["id"]
    assert report["metrics"]["concision"]["kind"] == "judge"
    assert "concision" not in judge_table() and "concision" not in reference_judge.rules()


def test_a_threshold_on_no_metric_is_refused(eval_root: Path, tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        'version = "1"\n[bad_cases]\njudge_score_below = 3.0\n'
        "[defaults]\nfaithfulnes = { min = 4.0 }\n",
        encoding="utf-8",
    )
    config = RunConfig(suite="mini", cache=False, thresholds_path=str(path))
    with pytest.raises(ConfigError, match=r"threshold\(s\) faithfulnes name no metric"):
        run_sync(config, write=False)
