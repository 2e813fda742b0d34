"""The seam between the harness and the generation pipeline.

:class:`PipelineFactory` builds the real :class:`app.generation.pipeline.generator.Pipeline` for a
run configuration (candidate model, ``--prompt`` overrides) and renders judge prompts;
:func:`observe_case` runs one case through it and turns the answer + trace into an
:class:`~app.eval.metrics.base.Observation` (plus the assembled context the judges read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from app.errors import ConfigError, RuntimeFailure
from app.eval.config import RunConfig
from app.eval.datasets import Case
from app.eval.metrics.base import Observation, normalise
from app.generation.pipeline.citations import extract_citations
from app.generation.pipeline.trace import Answer
from app.generation.registry import load_registry
from app.llm.types import Message
from app.paths import kb_dir
from app.retrieval.kb import KnowledgeBase, load_kb

if TYPE_CHECKING:
    from app.eval.records import CaseResult

QA_PROMPT = "system/kb_qa"
# --prompt <category>/<slug>_vN → the PipelineConfig field it overrides
PROMPT_FIELDS: dict[str, str] = {
    "system": "qa_prompt",
    "rewrite": "rewrite_prompt",
    "summary": "summary_prompt",
}


class PipelineFactory:
    """One per run: the KB, the registry and the pipeline the cases go through."""

    def __init__(self, config: RunConfig, engine: Any) -> None:
        self.config = config
        self.engine = engine
        self.registry = load_registry()
        self.kb: KnowledgeBase = load_kb(kb_dir())
        self.overrides = self._overrides(config.prompts)
        self._pipeline: Any = None

    def _overrides(self, prompts: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in prompts:
            spec = self.registry.get(name)  # PromptError names the unknown prompt
            field = PROMPT_FIELDS.get(spec.category)
            if field is None:
                raise ConfigError(
                    f"--prompt {name}: the pipeline has no {spec.category}/ prompt to replace; "
                    f"use one of the categories {sorted(PROMPT_FIELDS)}"
                )
            out[field] = spec.qualified
        return out

    def preflight(self) -> None:
        """Fail before the first case (exit 2) when a prompt cannot serve the chosen models."""
        spec = self.registry.get(self.qa_prompt)
        self.render(self.qa_prompt, self.config.model, {v: "x" for v in spec.variables})
        if self.config.judge:
            for prompt_id in ("judge/correctness", "judge/faithfulness", "judge/relevance"):
                spec = self.registry.get(prompt_id)
                self.render(prompt_id, self.config.judge, {v: "x" for v in spec.variables})
        # Load the tokeniser's dictionary now (jieba: ~0.7 s once per process) so it is not
        # billed to the first case's latency_s — which would skew its distribution and make
        # `compare` call whichever run went second "faster".
        from app.text import tokenize

        tokenize("预热 warm-up")

    @property
    def qa_prompt(self) -> str:
        return self.overrides.get("qa_prompt", QA_PROMPT)

    def pipeline(self) -> Any:
        if self._pipeline is None:
            from app.generation.pipeline.generator import Pipeline, PipelineConfig

            cfg = PipelineConfig.model_validate(
                {"model": self.config.model, "log_answers": False, **self.overrides}
            )
            self._pipeline = Pipeline(cfg, self.engine, kb=self.kb, registry=self.registry)
        return self._pipeline

    def chunk_acl(self) -> dict[str, tuple[str, ...]]:
        return {c.chunk_id: tuple(c.acl) for c in self.kb.chunks}

    def canary(self) -> str | None:
        canary = self.registry.get(self.qa_prompt).canary
        return str(canary) if canary else None

    def rejection_answer(self) -> str | None:
        answer = self.registry.get(self.qa_prompt).rejection_answer
        return str(answer) if answer else None

    def render(self, prompt_id: str, model: str, variables: Mapping[str, str]) -> Any:
        return self.registry.render(prompt_id, model=model, variables=dict(variables))

    def judge_prompt_refs(self) -> dict[str, dict[str, str | None]]:
        out: dict[str, dict[str, str | None]] = {}
        for prompt_id in ("judge/correctness", "judge/faithfulness", "judge/relevance"):
            spec = self.registry.get(prompt_id)
            out[prompt_id] = {"version": spec.qualified, "hash": spec.content_hash}
        return out

    def prompt_refs(self, results: Sequence[CaseResult]) -> dict[str, dict[str, str | None]]:
        """The QA prompt (and overrides) plus every prompt version a trace reports."""
        names = {self.qa_prompt, *self.overrides.values()}
        for result in results:
            trace = result.trace
            if trace is None:
                continue
            found = [trace.prompt_version, *trace.prompt_versions.values()]
            found.append(trace.rewrite.prompt_version)
            found.append(trace.memory.prompt_version if trace.memory is not None else None)
            names.update(v for v in found if v)
        out: dict[str, dict[str, str | None]] = {}
        for name in sorted(names):
            spec = self.registry.get(name)
            out[spec.prompt_id] = {"version": spec.qualified, "hash": spec.content_hash}
        return out

    def context_text(self, chunk_ids: Sequence[str]) -> str:
        parts = []
        for n, cid in enumerate(chunk_ids, start=1):
            chunk = self.kb.chunk(cid)
            parts.append(f"[{n}] {chunk.text if chunk else ''}")
        return "\n\n".join(parts)


REFUSAL_MODES = ("no_hits", "refusal", "injection_refused")


def observation_from_answer(answer: Answer, rejection: str | None) -> Observation:
    """The harness's view of a pipeline :class:`~app.generation.pipeline.trace.Answer`.

    Refused = a refusal mode (``no_hits``, ``refusal``, ``injection_refused``), a rejection
    keyword substitution (``trace.rejected``), or the prompt's rejection answer verbatim.
    Citations are every ``[n]`` in the final text (out-of-range numbers included).
    """
    trace = answer.trace
    text = answer.text
    assembled = tuple(trace.context_chunk_ids)
    refused = (
        trace.mode in REFUSAL_MODES
        or trace.rejected
        or (rejection is not None and normalise(text) == normalise(rejection))
    )
    return Observation(
        answer=text,
        refused=refused,
        retrieved=tuple(r.chunk_id for r in trace.retrieved),
        assembled=assembled,
        cited=extract_citations(text, len(assembled)).numbers,
        rewrite=trace.rewritten_query if trace.rewrite.triggered else None,
        mode=trace.mode,
        latency_s=trace.latency_ms / 1000.0,
        input_tokens=trace.tokens.input,
        output_tokens=trace.tokens.output,
        # no model call (no_hits / injection refusal) costs nothing; None = unpriced model
        cost_usd=0.0 if trace.tokens.llm_calls == 0 else trace.cost_usd,
        trace=trace,
    )


async def observe_case(
    case: Case, factory: PipelineFactory
) -> tuple[Observation | None, dict[str, Any]]:
    """Run the pipeline for one case. ``(None, {"error": …})`` when it failed."""
    history = [Message(t.role, t.content) for t in case.history]
    try:
        answer = await factory.pipeline().answer(
            case.question, history=history, user_acl=list(case.acl)
        )
    except RuntimeFailure as exc:
        return None, {"error": f"{type(exc).__name__}: {exc}"}
    obs = observation_from_answer(answer, factory.rejection_answer())
    return obs, {"context": factory.context_text(obs.assembled)}
