"""Preflight renders the pipeline's planned prompts; ``--prompt`` is routed by contract.

Regressions of issue 10:
* ``rag eval run --suite hard --model anthropic:claude-opus-4-7`` passed preflight (the QA
  prompt allows Opus) and aborted mid-run at the first pronoun question, because
  ``rewrite/standalone_v1`` does not allow that model;
* ``--prompt rewrite/disambiguate_zh_v1`` was routed by category into the standalone
  rewrite slot (called with ``history``/``question`` instead of ``chat_history``/``input``),
  and the report listed prompt overrides no case used.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.cli import main
from app.eval.run.observe import PipelineFactory
from app.eval.run.runner import RunConfig, run, run_sync
from tests.support.fake_llm_server import FakeLLMServer
from tests.support.fixtures import (  # noqa: F401
    fake_llm_server,
    isolated_cache,
    planted_keys,
)
from tests.support.recording_engine import RecordingEngine as Recording


def rag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_hard_suite_with_opus_fails_preflight_with_no_request_sent(
    fake_llm_server: FakeLLMServer,  # noqa: F811  (ANTHROPIC_BASE_URL points at it)
    isolated_cache: Path,  # noqa: F811
    planted_keys: dict[str, str],  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, err = rag(
        [
            "eval",
            "run",
            "--suite",
            "hard",
            "--model",
            "anthropic:claude-opus-4-7",
            "--quiet",
            "--out",
            str(tmp_path / "out"),
        ],
        capsys,
    )
    assert rc == 2, out + err
    assert fake_llm_server.requests == 0  # preflight ran before the first provider call
    text = " ".join(err.split())
    assert "preflight:" in text and "nothing was sent" in text
    assert "rewrite/standalone for anthropic:claude-opus-4-7" in text
    assert (
        "APPLICABLE_MODELS = ['claude-sonnet-4-6', 'claude-haiku-4-5', 'gpt-4o*', 'qwen2*']" in text
    )
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_pronoun_case_after_others_no_longer_aborts_mid_run(
    eval_root: Path,
    fake_llm_server: FakeLLMServer,  # noqa: F811
    planted_keys: dict[str, str],  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    """mini-001…004 have no history and run first (one at a time); mini-005 is the pronoun
    question. Before the fix the four earlier cases reached the server, then the run died."""
    argv = ["eval", "run", "--suite", "mini", "--model", "anthropic:claude-opus-4-7"]
    rc, out, err = rag([*argv, "--concurrency", "1", "--quiet"], capsys)
    assert rc == 2, out + err
    assert "preflight:" in err and "rewrite/standalone" in err
    assert fake_llm_server.requests == 0


def test_disambiguation_override_fills_the_disambiguation_slot(eval_root: Path) -> None:
    factory = PipelineFactory(
        RunConfig(suite="mini", prompts=("rewrite/disambiguate_zh_v1",)), None
    )
    cfg = factory.pipeline().config
    assert cfg.disambiguate_prompt == "rewrite/disambiguate_zh_v1"
    assert cfg.rewrite == "disambiguate"
    assert cfg.rewrite_prompt == "rewrite/standalone"  # the standalone slot is untouched


async def test_disambiguation_override_runs_with_its_own_variables(
    eval_root: Path,
    fake_llm_server: FakeLLMServer,  # noqa: F811
    planted_keys: dict[str, str],  # noqa: F811
) -> None:
    fake_llm_server.responder = lambda body: "那个人指的是张三。"
    model = f"openai:gpt-4o@{fake_llm_server.openai_base_url}"
    config = RunConfig(
        suite="mini",
        model=model,
        judge=None,
        prompts=("rewrite/disambiguate_zh_v1", "summary/summarize_zh_v1"),
        cache=False,
    )
    async with Recording() as engine:
        report = (await run(config, engine=engine, write=False)).report.model_dump(mode="json")
    rewrites = [r for _, r in engine.requests if r.purpose == "rewrite"]
    assert len(rewrites) == 1  # mini-005, the one pronoun question with history
    assert set(rewrites[0].variables) == {"chat_history", "input"}
    assert rewrites[0].variables["input"] == "那个人常驻哪里？"
    case = next(c for c in report["cases"] if c["id"] == "mini-005")
    assert case["trace"]["rewrite"]["prompt_version"] == "rewrite/disambiguate_zh_v1"
    # the report lists what the traces used: the disambiguation prompt, not the summary
    # override (no case's history needed a summary)
    assert report["meta"]["prompts"]["rewrite/disambiguate_zh"]["version"] == (
        "rewrite/disambiguate_zh_v1"
    )
    assert "summary/summarize_zh" not in report["meta"]["prompts"]
    assert not any(
        (c["trace"].get("memory") or {}).get("summarised_pairs") for c in report["cases"]
    )


@pytest.mark.parametrize(
    ("prompt", "contract"),
    [("classify/intent_v1", "classify"), ("rewrite/multi_query_v1", "multi-query")],
)
def test_override_without_a_slot_is_refused(
    eval_root: Path, capsys: pytest.CaptureFixture[str], prompt: str, contract: str
) -> None:
    rc, out, err = rag(["eval", "run", "--suite", "mini", "--prompt", prompt, "--quiet"], capsys)
    assert rc == 2, out + err
    text = " ".join(err.split())
    assert f"--prompt {prompt}" in text and f"the {contract} contract" in text
    assert "standalone-rewrite → rewrite_prompt" in text and "disambiguation" in text


def test_two_overrides_of_one_slot_are_refused(
    eval_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = rag(
        [
            "eval",
            "run",
            "--suite",
            "mini",
            "--prompt",
            "system/kb_qa_v1",
            "--prompt",
            "system/kb_qa_v2",
            "--quiet",
        ],
        capsys,
    )
    assert rc == 2 and re.search(r"conflicts with --prompt system/kb_qa_v1", err), err


def test_report_lists_only_the_prompt_versions_the_traces_used(eval_root: Path) -> None:
    outcome = run_sync(RunConfig(suite="mini", cache=False, judge=None), write=False)
    report = outcome.report.model_dump(mode="json")
    used: set[str] = set()
    for case in report["cases"]:
        trace = case["trace"]
        used.update(v for v in trace.get("prompt_versions", {}).values())
    listed = {ref["version"] for ref in report["meta"]["prompts"].values()}
    assert listed == used and "system/kb_qa_v2" in listed
    json.dumps(report)  # still plain JSON
