"""Rendering a prompt spec for a model: variables in, provider-ready request out.

The model string is parsed once, by :func:`app.llm.providers.families.parse_model`: any registered provider
family renders (``APPLICABLE_MODELS`` is matched on the bare model id). The registry builds the
:class:`ChatRequest`; the wire body is the model layer's
(``app.llm.providers.request_payload(rp.provider, rp.to_request())``, the encoder the
provider's ``generate`` sends), so ``rag prompts render --json`` shows exactly what goes out.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, cast

from app.errors import PromptError
from app.generation.registry.chat_formats import FORMATS, RENDERERS, check_alternation, format_for
from app.generation.registry.loader import PromptSpec, placeholders
from app.limits import LIMITS, check_text, lone_surrogate
from app.llm.spec import ModelRef, ProviderSpec
from app.llm.types import ChatRequest, Message, Purpose, coerce_history

_PURPOSES = frozenset({"generation", "judge", "rewrite", "summary", "classify", "safety", "other"})


@dataclass(frozen=True)
class RenderedPrompt:
    prompt_id: str
    qualified_version: str
    content_hash: str
    chat_format: str
    model: str  # bare model id, as sent to the provider
    model_ref: str  # the string the caller passed (provider prefix and @base_url kept)
    system: str | None
    messages: tuple[Message, ...]
    prompt_text: str | None
    variables: Mapping[str, str]
    rejection_answer: str | None = None
    rejection_trigger_keywords: tuple[str, ...] = ()
    response_format: str = "text"
    purpose: str = "other"
    ref: ModelRef | None = None  # the parsed model string (None only for hand-built records)

    @property
    def provider(self) -> ProviderSpec:
        """The provider whose encoder builds the wire body: the model string's, or for a
        bare model id the API its chat format implies (``anthropic`` → the Anthropic
        Messages API, any other → OpenAI Chat Completions at the official endpoint)."""
        if self.ref is not None and self.ref.provider is not None:
            return self.ref.provider
        family = "anthropic" if self.chat_format == "anthropic" else "openai"
        return ProviderSpec(family=family, model=self.model)

    def to_request(
        self,
        *,
        temperature: float = 0.0,
        max_tokens: int = 2048,
        purpose: Purpose | None = None,
        metadata: Mapping[str, str] | None = None,
        stop: Sequence[str] = (),
        response_format: str | None = None,
    ) -> ChatRequest:
        meta: dict[str, str] = {}
        if self.rejection_answer is not None:
            meta["rejection_answer"] = self.rejection_answer
        if self.chat_format == "anthropic" and self.system is not None:
            meta["system_cache_control"] = "ephemeral"
        meta.update(metadata or {})
        fmt = response_format or self.response_format
        return ChatRequest(
            model=self.model,
            system=self.system,
            messages=self.messages,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=tuple(stop),
            response_format="json" if fmt == "json" else "text",
            chat_format=self.chat_format,
            prompt_text=self.prompt_text,
            prompt_version=self.qualified_version,
            prompt_hash=self.content_hash,
            purpose=purpose
            or cast(Purpose, self.purpose if self.purpose in _PURPOSES else "other"),
            variables=dict(self.variables),
            metadata=meta,
        )


def model_allowed(spec: PromptSpec, ref: ModelRef) -> bool:
    if ref.offline:
        return True
    mid = ref.model.lower()
    return any(fnmatchcase(mid, p.lower()) for p in spec.applicable_models)


@functools.lru_cache(maxsize=1024)
def _template_problems(template: str) -> tuple[str, ...]:
    """:func:`placeholders`' problems of one template (a pure function of the text, kept
    for the registry's templates: a run renders the same few templates case after case)."""
    return tuple(placeholders(template)[1])


def render_spec(
    spec: PromptSpec,
    *,
    model: ModelRef,
    variables: Mapping[str, Any] | None = None,
    history: Iterable[object] | None = None,
    chat_format: str = "auto",
    allow_unlisted: bool = False,
) -> RenderedPrompt:
    """``allow_unlisted``: render for a model outside ``APPLICABLE_MODELS`` instead of
    refusing (``--allow-unlisted-model``; the run records it, see app.eval.run.runner).
    ``model`` is already parsed: the string is read at the edge (the CLI, the run's and the
    pipeline's config, :meth:`PromptRegistry.render` for a library caller), never here."""
    ref = model
    if not allow_unlisted and not model_allowed(spec, ref):
        raise PromptError(
            f"{spec.qualified} is not for model {ref.model!r}; APPLICABLE_MODELS = "
            f"{list(spec.applicable_models)}. Pick one of those, write a version for this "
            "model, or try it anyway with --allow-unlisted-model (the run says so)."
        )
    given = {k: v if isinstance(v, str) else str(v) for k, v in (variables or {}).items()}
    unexpected = sorted(set(given) - spec.variables) if not spec.variables.issuperset(given) else []
    if unexpected:
        raise PromptError(
            f"{spec.qualified}: unexpected variable(s) {unexpected}; it takes {sorted(spec.variables)}"
        )
    cap = LIMITS["variable_chars"].value
    for key, value in given.items():
        if len(value) > cap or lone_surrogate(value) is not None:  # the message only then
            check_text(value, "variable_chars", f"{spec.qualified}: variable {key}")
    values = {**{k: str(v) for k, v in spec.defaults.items()}, **given}
    missing = sorted(spec.variables - set(values))
    if missing:
        raise PromptError(
            f"{spec.qualified}: missing variable(s) {missing}; it takes {sorted(spec.variables)}"
        )
    for template in (spec.system_prompt, spec.user_template):
        problems = _template_problems(template) if template is not None else ()
        if problems:  # what `rag prompts check` reports as P019: refused, never crashed on
            raise PromptError(
                f"{spec.qualified}: the template cannot be rendered ({problems[0]}) — run "
                "`rag prompts check` and fix the P019 violation it reports"
            )
    try:  # defence in depth: never a traceback
        system = spec.system_prompt.format(**values) if spec.system_prompt is not None else None
        user = spec.user_template.format(**values)
    except (
        ValueError,
        KeyError,
        IndexError,
        AttributeError,
        TypeError,
        OverflowError,
        MemoryError,
    ) as exc:
        raise PromptError(
            f"{spec.qualified}: the template does not render ({type(exc).__name__}: {exc}) — "
            "run `rag prompts check` and fix the P019 violation it reports"
        ) from None
    messages = (*coerce_history(history), Message(role="user", content=user))
    check_alternation(messages)
    fmt = format_for(ref) if chat_format == "auto" else chat_format
    if fmt not in RENDERERS:
        raise PromptError(f"unknown chat format {fmt!r}; use auto or one of {list(FORMATS)}")
    text_renderer = RENDERERS[fmt]
    return RenderedPrompt(
        prompt_id=spec.prompt_id,
        qualified_version=spec.qualified,
        content_hash=spec.content_hash,
        chat_format=fmt,
        model=ref.model,
        model_ref=model.raw,
        system=system,
        messages=messages,
        prompt_text=text_renderer(system, messages) if text_renderer else None,
        variables=values,
        rejection_answer=spec.rejection_answer,
        rejection_trigger_keywords=spec.rejection_trigger_keywords,
        response_format=spec.response_format,
        purpose=spec.purpose,
        ref=ref,
    )
