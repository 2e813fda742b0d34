"""The pipeline-level warm cache (app/eval/run/warm.py, issue 14): a rerun with every answer
cached skips the pipeline, gives the report the pipeline would give, and any change of
what an answer depends on (prompts, KB, case, configuration, code, a stored reply) runs
the pipeline again."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from app.eval.config import RunConfig
from app.eval.run import warm
from app.eval.run.runner import RunOutcome, run_sync
from app.generation.pipeline import generator
from app.llm.providers import Provider, families, register_provider
from app.llm.types import ChatRequest, Completion, Usage
from app.paths import PACKAGE_DIR

KB = PACKAGE_DIR.parent / "tests" / "eval" / "kb" / "sample"


class EchoProvider(Provider):
    """A cacheable in-process model: answers with the first document it is sent."""

    family = "warmllm"
    cacheable = True
    calls: ClassVar[int] = 0
    tail: ClassVar[str] = ""
    with_tail: ClassVar[int] = 0  # replies that carried the tail (changed by it)

    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        EchoProvider.calls += 1
        if request.purpose == "rewrite":
            question = request.variables.get("question", request.variables.get("input", ""))
            text = json.dumps({"original": question, "rewritten": question}, ensure_ascii=False)
        else:
            docs = json.loads(request.metadata.get("documents", "[]"))
            text = f"{docs[0]} [1]{EchoProvider.tail}" if docs else "无法回答"
            EchoProvider.with_tail += bool(docs and EchoProvider.tail)
        return Completion(text=text, provider="warmllm", model=model, usage=Usage(10, 5))


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """The provider registered, and a count of pipeline answers actually computed."""
    saved = dict(families.FAMILIES)
    EchoProvider.calls, EchoProvider.tail, EchoProvider.with_tail = 0, "", 0
    register_provider("warmllm", EchoProvider, "a cacheable test provider")
    counted = {"pipeline": 0}
    real = generator.Pipeline.answer

    async def answer(self: generator.Pipeline, *args: Any, **kw: Any) -> Any:
        counted["pipeline"] += 1
        return await real(self, *args, **kw)

    monkeypatch.setattr(generator.Pipeline, "answer", answer)
    yield counted
    families.FAMILIES.clear()
    families.FAMILIES.update(saved)
    families.parse_model.cache_clear()


def _run(root: Path, counted: dict[str, int], **config: Any) -> tuple[RunOutcome, int, int]:
    """(outcome, pipeline answers computed, provider calls) of one mini-suite run."""
    before, calls = counted["pipeline"], EchoProvider.calls
    fields: dict[str, Any] = {
        "suite": "mini",
        "model": "warmllm:m1",
        "judge": None,
        "allow_unlisted_model": True,
        "retriever": "bm25",
        **config,
    }
    out = run_sync(RunConfig(**fields), out_dir=root / "reports")
    return out, counted["pipeline"] - before, EchoProvider.calls - calls


_VARYING = {"run_id", "created_at", "trace_id", "duration_s", "command"}


def _meaning(report: Any) -> Any:
    """A report without what differs between two runs of the same work (ids, times,
    latencies)."""
    if isinstance(report, dict):
        return {
            k: _meaning(v)
            for k, v in report.items()
            if k not in _VARYING and not k.startswith("latency")
        }
    if isinstance(report, list):
        return [_meaning(v) for v in report]
    return report


def _report(outcome: RunOutcome) -> Any:
    assert outcome.path is not None
    return _meaning(json.loads(outcome.path.read_text(encoding="utf-8")))


def test_a_rerun_replays_every_case_with_the_report_the_pipeline_gives(
    eval_root: Path, echo: dict[str, int]
) -> None:
    _, computed, calls = _run(eval_root, echo)
    assert computed == 5 and calls > 0
    replayed, computed, calls = _run(eval_root, echo)
    assert (computed, calls) == (0, 0)
    engine = replayed.summary.totals.engine
    assert engine is not None and engine.calls == 0 and engine.cache_hits > 0
    # the same rerun without the warm cache: the pipeline runs on cache hits
    (eval_root / ".cache" / "llm" / "pipeline_answers.sqlite3").unlink()
    by_pipeline, computed, calls = _run(eval_root, echo)
    assert (computed, calls) == (5, 0)
    assert _report(replayed) == _report(by_pipeline)
    cases = json.loads(replayed.path.read_text(encoding="utf-8"))["cases"]  # type: ignore[union-attr]
    assert all(
        c["trace"]["tokens"]["cached_calls"] == c["trace"]["tokens"]["llm_calls"] for c in cases
    )


def test_a_changed_case_is_run_again_and_only_it(eval_root: Path, echo: dict[str, int]) -> None:
    data = eval_root / "cases.jsonl"
    lines = (eval_root / "tests/eval/datasets/mini_v1.0.jsonl").read_text(encoding="utf-8")
    data.write_text(lines, encoding="utf-8")
    _run(eval_root, echo, dataset_path=str(data))
    first = json.loads(lines.splitlines()[0])
    first["question"] = first["question"].replace("？", "？请说明。")
    rest = lines.splitlines()[1:]
    data.write_text("\n".join([json.dumps(first, ensure_ascii=False), *rest]) + "\n", "utf-8")
    _, computed, _ = _run(eval_root, echo, dataset_path=str(data))
    assert computed == 1


def test_a_changed_kb_runs_the_pipeline_again(eval_root: Path, echo: dict[str, int]) -> None:
    kb = eval_root / "copy" / "sample"  # chunk ids are named after the folder
    shutil.copytree(KB, kb)
    _run(eval_root, echo, kb_path=str(kb))
    assert _run(eval_root, echo, kb_path=str(kb))[1] == 0
    doc = next(kb.glob("company/*.md"))
    doc.write_text(doc.read_text(encoding="utf-8") + "\n补充说明。\n", encoding="utf-8")
    assert _run(eval_root, echo, kb_path=str(kb))[1] == 5


def test_changed_prompts_run_the_pipeline_again(
    eval_root: Path, echo: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.eval.run import observe
    from app.generation.registry import build_registry, default_root

    prompts = eval_root / "prompts"
    shutil.copytree(default_root(), prompts)
    monkeypatch.setattr(observe, "load_registry", lambda: build_registry(prompts))
    _run(eval_root, echo)
    assert _run(eval_root, echo)[1] == 0
    (prompts / "NOTE.md").write_text("any change of the prompts root\n", encoding="utf-8")
    assert _run(eval_root, echo)[1] == 5


def test_a_changed_configuration_runs_the_pipeline_again(
    eval_root: Path, echo: dict[str, int]
) -> None:
    _run(eval_root, echo)
    assert _run(eval_root, echo)[1] == 0
    assert _run(eval_root, echo, max_tokens=300)[1] == 5
    assert _run(eval_root, echo, temperature=0.5)[1] == 5
    assert _run(eval_root, echo, model="warmllm:m2")[1] == 5
    assert _run(eval_root, echo, max_tokens=300)[1] == 0  # its own entries are kept


def test_changed_code_runs_the_pipeline_again(
    eval_root: Path, echo: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    code = eval_root / "code"
    code.mkdir()
    (code / "module.py").write_text("X = 1\n", encoding="utf-8")
    monkeypatch.setattr(warm, "APP_DIR", code)
    monkeypatch.setattr(warm, "_CODE", None)
    _run(eval_root, echo)
    assert _run(eval_root, echo)[1] == 0
    (code / "module.py").write_text("X = 2\n", encoding="utf-8")
    monkeypatch.setattr(warm, "_CODE", None)  # a new process reads the code anew
    assert _run(eval_root, echo)[1] == 5


def test_refresh_and_no_cache_run_the_pipeline_and_a_new_reply_is_never_replayed_stale(
    eval_root: Path, echo: dict[str, int]
) -> None:
    first, _, paid = _run(eval_root, echo)
    assert paid > 0 and first.calls == paid
    assert _run(eval_root, echo, cache=False)[1:] == (5, paid)  # --no-cache: all anew
    EchoProvider.tail = " (new)"
    _, computed, calls = _run(eval_root, echo, refresh_cache=True)
    assert (computed, calls) == (5, paid)  # --refresh-cache: the provider is asked again
    changed = EchoProvider.with_tail  # one answer call per case: the cases whose reply changed
    assert 0 < changed < 5
    after, computed, calls = _run(eval_root, echo)
    # every case whose stored reply was replaced by a different one is run again (no call is
    # paid: the new replies are in the cache); a case whose replies came back the same (a
    # refusal: the same words) is replayed — whatever the calls' latencies were
    cases = [c for c in after.report.cases if c.trace]
    assert (computed, calls) == (changed, 0)
    answered = [c for c in cases if c.trace.mode in ("strict", "assisted")]  # type: ignore[union-attr]
    assert answered and all((c.answer or "").endswith("(new)") for c in answered)
    assert _run(eval_root, echo)[1] == 0  # and now those are kept


def test_the_fingerprint_never_holds_a_secret_and_covers_the_environment() -> None:
    env = {"RAG_EMBED_API_KEY": "sk-abc", "RAG_X_TOKEN": "t", "RAG_PROMPT_PIN": "a=b", "HOME": "/"}
    assert warm.environment(env) == {"RAG_PROMPT_PIN": "a=b"}


def test_an_offline_candidate_is_never_replayed(eval_root: Path, echo: dict[str, int]) -> None:
    # offline baselines are not cacheable: re-computing their rules is the point
    _run(eval_root, echo, model="offline:extractive")
    assert _run(eval_root, echo, model="offline:extractive")[1] == 5
    assert not (eval_root / ".cache" / "llm" / "pipeline_answers.sqlite3").exists()


def test_entries_unused_for_30_days_are_pruned_and_a_replay_keeps_one_fresh(
    eval_root: Path, echo: dict[str, int]
) -> None:
    """Every code change makes the old entries unreachable (the code is in the key), so a CI
    cache kept across pull requests grew for ever; a replay counts as a use."""
    import sqlite3
    import time

    _run(eval_root, echo)
    db = eval_root / ".cache" / "llm" / "pipeline_answers.sqlite3"
    old = time.time() - warm.MAX_AGE_S - 3600
    with sqlite3.connect(db) as conn:
        keys = {k for (k,) in conn.execute("SELECT key FROM entries")}
        conn.execute("UPDATE entries SET created_at = ?", (old,))
        conn.execute("INSERT INTO entries VALUES ('from-an-older-commit', ?, '{}')", (old,))
    _, computed, calls = _run(eval_root, echo)
    assert (computed, calls) == (0, 0)  # aged entries are still replayed…
    with sqlite3.connect(db) as conn:
        left = dict(conn.execute("SELECT key, created_at FROM entries").fetchall())
    assert "from-an-older-commit" not in left  # … an unused one is gone after the run
    replayed = {k for k, at in left.items() if at > time.time() - 3600}
    assert len(replayed) >= 5 and replayed <= keys  # the five answers, touched by the replay
