"""The provider-neutral request and completion records.

A :class:`ChatRequest` is what the prompt registry renders plus sampling parameters; every
provider takes one and returns a :class:`Completion`. Both are frozen and hashable-by-value
(through :meth:`ChatRequest.cache_payload`), which is what the response cache keys on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from app.errors import UserError

if TYPE_CHECKING:
    from app.llm.spec import ModelRef

Role = Literal["user", "assistant"]
# Namespaces in the response cache: generation and judge entries are distinguishable.
Purpose = Literal["generation", "judge", "rewrite", "summary", "classify", "safety", "other"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


HISTORY_SHAPE = '{"role": "user"|"assistant", "content": "<text>"}'


def coerce_history(history: Iterable[object] | None, *, source: str = "") -> tuple[Message, ...]:
    """The one history coercer: :class:`Message`, ``{"role", "content"}`` mappings or objects
    with those attributes (a dataset ``Turn``) become messages, oldest first.

    Anything else raises :class:`~app.errors.UserError` naming the item (1-based) and the
    expected shape; ``source`` (e.g. ``"--history chat.json"``) prefixes the message.
    Roles are not checked for alternation here: a prompt's chat format does that.
    """
    out: list[Message] = []
    for i, item in enumerate(history or (), 1):
        if isinstance(item, Message):
            out.append(item)
            continue
        if isinstance(item, Mapping):
            role, content = item.get("role"), item.get("content")
        else:
            role, content = getattr(item, "role", None), getattr(item, "content", None)
        if role not in ("user", "assistant") or not isinstance(content, str):
            shown = repr(item)
            shown = shown if len(shown) <= 120 else shown[:120] + "…"
            where = f"{source}: " if source else ""
            raise UserError(f"{where}history item {i} must be {HISTORY_SHAPE}, got {shown}")
        out.append(Message(role=cast(Role, role), content=content))
    return tuple(out)


@dataclass(frozen=True)
class ChatRequest:
    """A provider-ready request.

    ``system`` and ``messages`` are the chat form. ``prompt_text`` is set for single-string
    formats (Llama 2, plain text) and is what a completion-style server receives.
    ``variables`` are the template variables the registry substituted; offline providers
    read them (question, context, candidate, golden_answer) instead of parsing prose.
    ``metadata`` carries non-secret facts about the prompt (e.g. ``rejection_answer``).
    ``json_schema`` (with ``response_format="json"``) is the shape a reply must have: a
    server that can constrain its output to it (the local llama.cpp tier's grammar) does;
    the others get ``json_object`` and the prompt's own instructions.
    """

    model: str
    system: str | None
    messages: tuple[Message, ...]
    temperature: float = 0.0
    max_tokens: int = 2048
    stop: tuple[str, ...] = ()
    response_format: Literal["text", "json"] = "text"
    chat_format: str = "openai"
    prompt_text: str | None = None
    prompt_version: str | None = None
    prompt_hash: str | None = None
    purpose: Purpose = "generation"
    variables: Mapping[str, str] = field(default_factory=dict)
    metadata: Mapping[str, str] = field(default_factory=dict)
    json_schema: Mapping[str, Any] | None = None

    def cache_payload(self) -> dict[str, Any]:
        """Everything that determines the answer, as plain JSON-able data (no secrets).
        ``json_schema`` only when set, so a request without one keeps its key."""
        payload: dict[str, Any] = {
            "model": self.model,
            "system": self.system,
            "messages": [[m.role, m.content] for m in self.messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop),
            "response_format": self.response_format,
            "chat_format": self.chat_format,
            "prompt_text": self.prompt_text,
            "purpose": self.purpose,
            "variables": dict(sorted(self.variables.items())),
            "metadata": dict(sorted(self.metadata.items())),
        }
        if self.json_schema is not None:
            payload["json_schema"] = self.json_schema
        return payload


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Completion:
    """One answer from one provider call (or from the cache: ``cached`` says which)."""

    text: str
    provider: str  # e.g. "anthropic", "openai", "offline"
    model: str  # the model id as sent, e.g. "claude-sonnet-4-6" or "extractive"
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    request_id: str | None = None
    cost_usd: float | None = None  # None when the model is not in the price table
    cached: bool = False
    sample_index: int = 0
    #: characters of the provider's text that were not valid Unicode (lone surrogates) and
    #: were replaced by U+FFFD at the provider boundary (:mod:`app.wellformed`)
    repaired: int = 0


class EngineLike(Protocol):
    """What the pipeline, the judges and calibration need from
    :class:`app.llm.engine.Engine`: one completion for a parsed model and a request."""

    async def generate(
        self, provider: ModelRef, request: ChatRequest, sample_index: int = 0
    ) -> Completion: ...
