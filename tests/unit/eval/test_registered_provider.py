"""A provider added with ``register_provider`` works end to end: render, preflight, engine,
judges and the report all read the one model-string parser (issue 10 defect: it was
refused at render time because the renderer had a second parser with a fixed family list)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from app.cli import main
from app.llm.providers import Provider, families, register_provider
from app.llm.types import ChatRequest, Completion, Usage
from tests.support.registry import wire


class TinyProvider(Provider):
    """A registered family that answers from the documents it is sent (no network)."""

    family = "tinyllm"
    cacheable = False
    seen: ClassVar[list[tuple[str, ChatRequest]]] = []

    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        TinyProvider.seen.append((model, request))
        if request.purpose == "rewrite":
            question = request.variables.get("question", request.variables.get("input", ""))
            text = json.dumps({"original": question, "rewritten": question}, ensure_ascii=False)
        else:
            docs = json.loads(request.metadata.get("documents", "[]"))
            text = f"{docs[0]} [1]" if docs else (request.metadata.get("rejection_answer") or "")
        return Completion(text=text, provider="tinyllm", model=model, usage=Usage(10, 5))


@pytest.fixture
def tinyllm() -> Iterator[type[TinyProvider]]:
    saved = dict(families.FAMILIES)
    TinyProvider.seen.clear()
    register_provider("tinyllm", TinyProvider, "a test provider: tinyllm:<model>")
    yield TinyProvider
    families.FAMILIES.clear()
    families.FAMILIES.update(saved)
    families.parse_model.cache_clear()


def test_render_accepts_a_registered_family(tinyllm: type[TinyProvider]) -> None:
    from app.generation.registry import render

    rp = render("system/kb_qa", model="tinyllm:gpt-4o", variables={"question": "q", "context": "c"})
    assert rp.model == "gpt-4o" and rp.model_ref == "tinyllm:gpt-4o"
    assert rp.qualified_version == "system/kb_qa_v2" and rp.chat_format == "openai"
    assert str(rp.provider) == "tinyllm:gpt-4o" and not rp.provider.offline
    assert wire(rp)["model"] == "gpt-4o"  # Provider.payload: the request as it is received


def test_a_registered_provider_runs_rag_eval_run_end_to_end(
    tinyllm: type[TinyProvider], eval_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "run", "--suite", "mini", "--model", "tinyllm:gpt-4o", "--quiet"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(eval_root / "reports")])
    out, err = capsys.readouterr()
    match = re.search(r"report: (\S+\.json)", out)
    assert match, out + err
    report = json.loads(Path(match.group(1)).read_text(encoding="utf-8"))
    assert int(exc.value.code or 0) == (0 if report["status"] == "pass" else 1)
    assert report["meta"]["candidate"] == {"provider": "tinyllm:gpt-4o", "offline": False}
    cases = report["cases"]
    assert cases and all(not c.get("errors") for c in cases), [c.get("errors") for c in cases]
    generation = [(m, r) for m, r in tinyllm.seen if r.purpose == "generation"]
    assert generation and all(model == "gpt-4o" for model, _ in generation)
    assert all(r.model == "gpt-4o" for _, r in generation)  # the bare id, as sent
    answered = [c for c in cases if c["trace"]["mode"] in ("strict", "assisted")]
    assert answered and all(c["trace"]["prompt_version"] == "system/kb_qa_v2" for c in answered)
    assert "offline baseline" not in out  # a registered model is not reported as a baseline
