"""The generation pipeline: one call from a question to an answer with a trace.

::

    question + history
      → injection check (refuse / clean / alert)                 app.generation.pipeline.safety
      → rewrite (trigger, window, prompt, guard, cache)           app.generation.pipeline.rewrite
      → ACL-filtered BM25 + dense, rewritten + original query,    app.retrieval(.hybrid)
        de-duplicated by chunk id, reranked
      → score-aware assembly (no_hits / refusal / strict / assisted)  app.generation.pipeline.assembly
      → summary memory within max_tokens − prompt length          app.generation.pipeline.memory
      → LLM (app.llm.engine.Engine)
      → rejection keywords, "无法确定" bad cases, citation check   app.generation.pipeline.citations
      → Answer(text, citations, trace) + one JSON log line          app.generation.pipeline.answer_log

``Pipeline`` is safe to share between concurrent ``answer`` calls: per-answer accounting
lives in a local :class:`_Run`; the shared state (ACL views, rewrite cache) is append-only.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from app.generation.pipeline import answer_log
from app.generation.pipeline.assembly import Assembly, layout_for, select
from app.generation.pipeline.citations import apply_rejection, extract_citations
from app.generation.pipeline.config import PipelineConfig
from app.generation.pipeline.memory import (
    LANGUAGES,
    Language,
    Summarizer,
    SummaryMemory,
    language_of,
)
from app.generation.pipeline.rewrite import RewriteLLM, Rewriter, RewriteResult
from app.generation.pipeline.safety import (
    DocumentScreen,
    clean,
    detect_injection,
    escape_xml,
    screen_history,
)
from app.generation.pipeline.trace import (
    Answer,
    AnswerMode,
    RetrievedChunk,
    TokenUsage,
    Trace,
    memory_row,
    new_trace_id,
    rewrite_row,
    sent_rows,
    utc_stamp,
)
from app.generation.registry import PromptRegistry, RenderedPrompt, load_registry
from app.generation.registry.loader import PromptSpec
from app.generation.registry.render import render_spec
from app.limits import check_history, check_question
from app.llm.spec import ModelRef
from app.llm.tokens import get_counter
from app.llm.types import Completion, EngineLike, Message, coerce_history
from app.paths import kb_dir
from app.retrieval.choose import make_retriever
from app.retrieval.index import Hit, Retriever
from app.retrieval.kb import KnowledgeBase, load_kb, reader_groups
from app.retrieval.rerank import Reranker, get_reranker, merge_hits
from app.text import answer_refused, is_uncertain

__all__ = ["Answer", "EngineLike", "Pipeline", "PipelineConfig", "Trace", "generate"]

log = logging.getLogger(__name__)
bad_case_log = logging.getLogger(answer_log.BAD_CASES_LOGGER)


@dataclass
class _Run:
    """Per-answer accounting (never stored on the shared pipeline)."""

    sample_index: int = 0
    cost: float | None = None
    specs: dict[str, PromptSpec] = field(default_factory=dict)  # rollout arms: id -> version
    history: tuple[Message, ...] = ()  # the conversation before the question (answer log)
    # token counts summed as plain ints (the trace's TokenUsage is built once, at the end)
    input: int = 0
    output: int = 0
    llm_calls: int = 0
    cached_calls: int = 0

    def account(self, c: Completion) -> None:
        self.input += c.usage.input_tokens
        self.output += c.usage.output_tokens
        self.llm_calls += 1
        self.cached_calls += int(c.cached)
        if c.cost_usd is not None:
            self.cost = (self.cost or 0.0) + c.cost_usd

    @property
    def usage(self) -> TokenUsage:
        return TokenUsage(**self.usage_row())

    def usage_row(self) -> dict[str, int]:
        """:attr:`usage` as the plain dict the trace is validated from."""
        return {
            "input": self.input,
            "output": self.output,
            "llm_calls": self.llm_calls,
            "cached_calls": self.cached_calls,
        }


_QUESTION_TAGGED = re.compile(r"<[^<>/]+>\s*\{question\}")


class Pipeline:
    """The RAG pipeline of DESIGN.md "Generation runtime" (see the module docstring)."""

    def __init__(
        self,
        config: PipelineConfig | None = None,
        engine: EngineLike | None = None,
        *,
        kb: KnowledgeBase | None = None,
        registry: PromptRegistry | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.config = config or PipelineConfig()
        if engine is None:
            from app.llm.engine import Engine

            engine = Engine()
        self.engine = engine
        self.kb = kb if kb is not None else load_kb(self.config.kb_path or kb_dir())
        self.registry = registry if registry is not None else load_registry()
        self.retriever: Retriever = make_retriever(
            self.kb, self.config.retriever, self.config.embedder
        )
        self.reranker = reranker or get_reranker(self.config.reranker, self.retriever)
        self.counter = get_counter(self.config.token_counter)
        self.documents = DocumentScreen()
        self.rewriter = Rewriter(
            self.config.rewrite,
            standalone_prompt=self.config.rewrite_prompt,
            disambiguate_prompt=self.config.disambiguate_prompt,
        )
        self._planned = frozenset(self.planned_prompts())
        self._planned_ids = tuple(dict.fromkeys(pid for pid, _model in self._planned))
        for prompt_id, _model in self._planned:  # fail fast on a typo, naming it
            self.registry.get(prompt_id)
        if self.config.log_answers:
            answer_log.install()

    def planned_prompts(
        self, *, history_possible: bool = True, languages: Iterable[Language] = LANGUAGES
    ) -> list[tuple[str, str]]:
        """``(prompt id, model)`` for every prompt this pipeline may render, as configured.

        The answer prompts (QA and refusal, or refusal + strict + assisted with
        ``mode_prompts``), and — when a question may come with history — the rewrite prompt
        of the strategy (disambiguation by language) and the summary prompt by language,
        for the question ``languages`` given (:func:`language_of`; default both). The
        runtime renders nothing else (:meth:`_render` refuses an unplanned pair), so a
        preflight that renders this list for the chosen models cannot miss a prompt."""
        cfg = self.config
        answer = [cfg.refusal_prompt]
        answer += [cfg.strict_prompt, cfg.assisted_prompt] if cfg.mode_prompts else [cfg.qa_prompt]
        out = [(p, cfg.model) for p in answer]
        if history_possible:
            langs = [lang for lang in LANGUAGES if lang in set(languages)]
            for lang in langs:
                rewrite = self.rewriter.prompt_for(lang)
                if rewrite is not None:
                    out.append((rewrite, cfg.rewrite_model or cfg.model))
            for lang in langs:
                out.append((self._summary_prompt(lang), cfg.summary_model or cfg.model))
        return list(dict.fromkeys(out))

    def _summary_prompt(self, lang: Language) -> str:
        return self.config.summary_prompt or f"summary/summarize_{lang}"

    def _render(
        self,
        prompt_id: str,
        model: ModelRef,
        variables: Mapping[str, str],
        history: Sequence[Message] = (),
        spec: PromptSpec | None = None,
    ) -> RenderedPrompt:
        """Render ``prompt_id`` (``spec``: the registry's spec for it, when the caller
        looked it up already: the same render without a second lookup)."""
        if (prompt_id, model.raw) not in self._planned:
            raise RuntimeError(  # a bug: planned_prompts() must list what the runtime renders
                f"internal error: {prompt_id} for {model} is not in planned_prompts()"
            )
        return render_spec(
            spec if spec is not None else self.registry.get(prompt_id),
            model=model,
            variables=variables,
            history=history,
            allow_unlisted=self.config.allow_unlisted_model,
        )

    # -- model calls -----------------------------------------------------------------------
    async def _call(
        self, run: _Run, model: ModelRef, prompt_id: str, variables: Mapping[str, str], **kw: Any
    ) -> tuple[str, str]:
        rp = self._render(prompt_id, model, variables, spec=run.specs.get(prompt_id))
        request = rp.to_request(**kw)
        completion = await self.engine.generate(model, request, sample_index=run.sample_index)
        run.account(completion)
        return completion.text, rp.qualified_version

    def _rewrite_llm(self, run: _Run, history: Sequence[Message]) -> RewriteLLM:
        """The rewrite model, called through the engine like the answer model (also the
        offline baseline: ``offline:extractive`` answers the rewrite prompt with the
        offline rewriter, which reads the whole conversation from ``metadata["history"]``)."""
        model = self.config.rewrite_ref

        async def call(prompt_id: str, variables: Mapping[str, str]) -> tuple[str, str]:
            conversation = json.dumps(  # only when the rewrite model is called
                [{"role": m.role, "content": m.content} for m in history], ensure_ascii=False
            )
            return await self._call(
                run,
                model,
                prompt_id,
                variables,
                temperature=0.0,
                max_tokens=min(256, self.config.max_answer_tokens),
                purpose="rewrite",
                metadata={"history": conversation},
            )

        return call

    def _summarizer(self, run: _Run, language: Language) -> Summarizer:
        """The summary model, called through the engine (offline: the offline summariser)."""
        model = self.config.summary_ref
        prompt = self._summary_prompt(language)

        async def summarize(summary: str, new_lines: str) -> tuple[str, str | None]:
            return await self._call(
                run,
                model,
                prompt,
                {"summary": summary, "new_lines": new_lines},
                temperature=0.0,
                max_tokens=min(256, self.config.max_answer_tokens),
                purpose="summary",
                stop=("\n\n",),
            )

        return summarize

    # -- the pipeline ----------------------------------------------------------------------
    async def answer(
        self,
        question: str,
        history: Iterable[Any] | None = None,
        user_acl: Iterable[str] | str = ("public",),
        *,
        sample_index: int = 0,
        user: str | None = None,
    ) -> Answer:
        """Answer ``question`` for a reader holding ``user_acl`` (a group or groups; everyone
        also holds ``public``). ``history`` is the conversation before the question, oldest
        first; ``sample_index`` is passed to the engine (repeated samples of one case); ``user``
        (user/session id) picks the rollout arms (:meth:`PromptRegistry.arms_for`)."""
        started = time.perf_counter()
        cfg = self.config
        run = _Run(sample_index=sample_index)
        run.specs, arms = self.registry.arms_for(self._planned_ids, user)
        check_question(question)  # documented limits, before any (linear) work
        turns = coerce_history(history)
        check_history([t.content for t in turns])
        run.history = turns
        acl = list(reader_groups(user_acl))  # the one ACL rule: unknown groups refused
        lang = language_of(question)
        trace_id, created_at = new_trace_id(), utc_stamp()
        # the trace's fields and its injection record as plain dicts while the answer runs:
        # the typed Trace is validated once, in _finish (one pydantic call, not a dozen)
        injection: dict[str, Any] = {"policy": cfg.injection_policy}

        def new_trace(rewrite: dict[str, Any], rewritten_query: str) -> dict[str, Any]:
            # built once the rewrite is known (the trace's id and clock are read first)
            return {
                "trace_id": trace_id,
                "created_at": created_at,
                "model": cfg.model,
                "user_acl": acl,
                "question": question,
                "rewritten_query": rewritten_query,
                "rewrite": rewrite,
                "mode": "no_hits",
                "floors": {
                    "low": cfg.low_floor,
                    "high": cfg.high_floor,
                    "strict_ratio": cfg.strict_ratio,
                },
                "prompt_versions": {},
                "injection": injection,
                **arms,
            }

        # 1. injection defence: the question, every history turn (retrieved chunks: step 3)
        query = question.strip()
        finding = detect_injection(query)
        screened = screen_history([t.content for t in turns], cfg.injection_policy)
        injection["score"] = finding.score
        injection["history_turns"] = list(screened.flagged)
        if screened.flagged:
            turns = tuple(
                Message(role=t.role, content=c)
                for t, c in zip(turns, screened.contents, strict=True)
            )
        if finding.detected or screened.flagged:
            injection["detected"] = True
            injection["patterns"] = list(finding.patterns)
            injection["families"] = list(finding.families)
            log.warning(
                "injection_detected trace_id=%s patterns=%s history_turns=%s policy=%s",
                trace_id,
                ",".join(finding.patterns),
                list(screened.flagged),
                cfg.injection_policy,
            )
            if finding.detected and cfg.injection_policy == "clean":
                # remove the injection, go on with the question left ("" → refuse below)
                cleaned = clean(query)
                query = cleaned.text
                injection["removed"] = list(cleaned.removed)
                injection["cleaned_question"] = query or None
                injection["action"] = "cleaned"
            elif cfg.injection_policy == "clean":
                injection["action"] = "cleaned"
            elif cfg.injection_policy == "alert":
                injection["action"] = "alerted"
            if cfg.injection_policy == "refuse" or not query:
                injection["action"] = "refused"
                reply = cfg.injection_reply_zh if lang == "zh" else cfg.injection_reply_en
                not_run = {"strategy": cfg.rewrite, "triggered": False, "reason": "not run"}
                trace = new_trace(not_run, question)
                return self._finish(trace, "injection_refused", reply, [], run, started)

        # 2. rewrite
        rw = await self.rewriter.rewrite(query, turns, llm=self._rewrite_llm(run, turns), lang=lang)
        trace = new_trace(rewrite_row(rw), rw.rewritten)
        if rw.prompt_version:
            trace["prompt_versions"]["rewrite"] = rw.prompt_version

        # 3. retrieval: dual recall, merge, de-duplicate, rerank (ACL applied inside)
        queries = [rw.rewritten] + ([query] if rw.changed else [])
        recalled = [self.retriever.search(q, acl, cfg.top_k) for q in queries]
        hits = self.reranker.rerank(queries, merge_hits(*recalled), acl)
        trace["retrieved"] = _retrieved_rows(hits, rw)
        isolated = [h.chunk_id for h in hits if self.documents.flagged(h.chunk_id, h.chunk.text)]
        if isolated:  # indirect injection in the KB: isolated, never obeyed
            injection["documents"] = isolated
            hits = [h for h in hits if h.chunk_id not in isolated]
            log.warning("injection_in_documents trace_id=%s chunks=%s", trace_id, isolated)

        # 4. assembly
        asm = select(hits, cfg.floors)
        trace["top1_score"] = asm.top1
        if asm.mode == "no_hits":
            reply = cfg.no_hits_reply_zh if lang == "zh" else cfg.no_hits_reply_en
            return self._finish(trace, "no_hits", reply, [], run, started)
        trace["context_chunk_ids"] = asm.chunk_ids
        prompt_id = self._prompt_for(asm)
        spec = run.specs.get(prompt_id) or self.registry.get(prompt_id)
        variables = self._variables(
            spec.variables, spec.user_template, rw.rewritten, asm, lang, spec.prompt_id
        )

        # 5. summary memory within max_tokens − prompt length
        base = self._render(
            prompt_id, cfg.model_ref, {**variables, **_blank(spec.variables)}, spec=spec
        )
        prompt_tokens = self.counter.count(base.system or "") + sum(
            self.counter.count(m.content) for m in base.messages
        )
        memory = await SummaryMemory(self.counter, self._summarizer(run, lang), lang).load(
            turns, cfg.max_tokens, prompt_tokens
        )
        trace["memory"] = memory_row(memory, cfg.max_tokens, prompt_tokens, len(turns))
        if memory.summary_prompt_version:
            trace["prompt_versions"]["summary"] = memory.summary_prompt_version
        history_msgs: Sequence[Message] = ()
        if "chat_history" in spec.variables:
            variables["chat_history"] = memory.chat_history
        else:
            history_msgs = memory.as_messages(lang)

        # 6. the model (no history to add: the prompt is the one rendered in step 5)
        if history_msgs or "chat_history" in spec.variables:
            rp = self._render(prompt_id, cfg.model_ref, variables, history_msgs, spec=spec)
        else:
            rp = base
        trace["prompt_version"] = rp.qualified_version
        trace["prompt_hash"] = rp.content_hash
        trace["prompt_versions"]["qa"] = rp.qualified_version
        request = rp.to_request(
            temperature=cfg.temperature,
            max_tokens=cfg.max_answer_tokens,
            purpose="generation",
            # the plain question (not XML-escaped or tag-wrapped) for offline baselines
            metadata={"documents": asm.documents_json(), "question": rw.rewritten},
        )
        trace["sent"] = sent_rows(request)
        completion = await self.engine.generate(cfg.model_ref, request, sample_index=sample_index)
        run.account(completion)

        # 7. after the model
        raw = completion.text.strip()
        trace["raw_answer"] = raw
        trace["uncertain"] = uncertain = is_uncertain(raw)
        text, trace["rejected"] = apply_rejection(
            raw, rp.rejection_trigger_keywords, rp.rejection_answer
        )
        citations: list[dict[str, Any]] = []
        if uncertain:
            bad_case_log.info(
                answer_log.dumps(
                    {
                        "trace_id": trace_id,
                        "reason": "uncertain",
                        "question": question,
                        "rewritten_query": rw.rewritten,
                        "prompt_version": rp.qualified_version,
                        "model": cfg.model,
                        "mode": asm.mode,
                        "context_chunk_ids": asm.chunk_ids,
                        "answer": raw,
                    }
                ),
                extra={"bad_case_log": True},
            )
        elif not trace["rejected"]:
            check = extract_citations(raw, len(asm.documents))
            trace["citations"] = [
                {
                    "n": n,
                    "chunk_id": asm.documents[n - 1].chunk_id if n in check.valid else None,
                    "valid": n in check.valid,
                }
                for n in check.numbers
            ]
            trace["invalid_citations"] = list(check.invalid)
            if check.invalid:
                log.warning(
                    "invalid_citations trace_id=%s invalid=%s documents=%d",
                    trace_id,
                    list(check.invalid),
                    len(asm.documents),
                )
            citations = [
                {
                    "n": n,
                    "chunk_id": asm.documents[n - 1].chunk_id,
                    "title": asm.documents[n - 1].chunk.title,
                }
                for n in check.valid
            ]
        return self._finish(
            trace,
            asm.mode,
            text,
            citations,
            run,
            started,
            variables.get("context", ""),
            rp.rejection_answer,
        )

    def _prompt_for(self, asm: Assembly) -> str:
        cfg = self.config
        if asm.mode == "refusal":
            return cfg.refusal_prompt
        if cfg.mode_prompts:
            return cfg.strict_prompt if asm.mode == "strict" else cfg.assisted_prompt
        return cfg.qa_prompt

    def _variables(
        self,
        names: frozenset[str],
        template: str,
        question: str,
        asm: Assembly,
        lang: Language,
        prompt_id: str,
    ) -> dict[str, str]:
        """The prompt's variables. The question is XML-escaped; a template that does not put
        ``{question}`` inside a tag gets it wrapped in ``<用户提问>`` / ``<question>``."""
        q = escape_xml(question)
        if not _QUESTION_TAGGED.search(template):
            tag = "用户提问" if lang == "zh" else "question"
            q = f"<{tag}>{q}</{tag}>"
        values: dict[str, str] = {"question": q}
        if "context" in names:
            values["context"] = asm.context(layout_for(prompt_id))
        if "chat_history" in names:
            values["chat_history"] = ""
        values.update({k: v for k, v in self.config.prompt_variables.items() if k in names})
        return {k: v for k, v in values.items() if k in names}

    def _finish(
        self,
        fields: dict[str, Any],
        mode: AnswerMode,
        text: str,
        citations: list[dict[str, Any]],
        run: _Run,
        started: float,
        context: str = "",
        rejection: str | None = None,
    ) -> Answer:
        """The answer, its trace typed and validated from the fields the run collected (one
        pydantic validation of the whole record: the typed models stay the schema)."""
        fields["mode"] = mode
        fields["tokens"] = run.usage_row()
        fields["cost_usd"] = run.cost
        fields["latency_ms"] = round((time.perf_counter() - started) * 1000, 2)
        refused = answer_refused(mode, bool(fields.get("rejected")), text, rejection)
        answer = _ANSWER.validate_python(
            {
                "text": text,
                "citations": citations,
                "trace": fields,
                "context": context,
                "refused": refused,
            }
        )
        if self.config.log_answers:
            record = answer_log.answer_record(answer, run.history)
            log.info(answer_log.dumps(record.model_dump(mode="json")), extra={"answer_log": True})
        return answer


def _blank(names: frozenset[str]) -> dict[str, str]:
    return {"chat_history": ""} if "chat_history" in names else {}


_ROWS: TypeAdapter[list[RetrievedChunk]] = TypeAdapter(list[RetrievedChunk])  # one call, all rows
_ANSWER: TypeAdapter[Answer] = TypeAdapter(Answer)


def _retrieved_rows(hits: Sequence[Hit], rw: RewriteResult) -> list[dict[str, Any]]:
    """The trace's ``retrieved`` rows as plain dicts (validated with the whole trace)."""
    original = rw.original if rw.changed else None  # which variant: the original, else rewritten
    return [
        {
            "chunk_id": h.chunk_id,
            "title": h.chunk.title,
            "score": h.score,
            "raw_score": h.raw_score,
            "query": "original" if h.query == original else "rewritten",
        }
        for h in hits
    ]


def _retrieved(hits: Sequence[Hit], rw: RewriteResult) -> list[RetrievedChunk]:
    """:func:`_retrieved_rows` typed (one validation of all rows)."""
    return _ROWS.validate_python(_retrieved_rows(hits, rw))


async def generate(
    question: str,
    history: Iterable[Any] | None = None,
    user_acl: Iterable[str] | str = ("public",),
    *,
    config: PipelineConfig | None = None,
    engine: EngineLike | None = None,
) -> Answer:
    """One-shot convenience: build a :class:`Pipeline` and answer one question."""
    return await Pipeline(config, engine).answer(question, history, user_acl)
