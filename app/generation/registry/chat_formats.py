"""Chat formats: one table from model id to format, one renderer per format.

=========  =====================================================================
anthropic  ``system`` parameter (one text block marked cacheable) + messages
openai     a ``system`` message first, then the conversation (OpenAI-compatible)
llama2     one string, byte-identical to Meta's Llama-2-chat ``chat_template``
text       one plain string (completion-style servers)
=========  =====================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from app.errors import PromptError
from app.llm.types import Message

KNOWN_PROVIDERS = frozenset({"anthropic", "openai", "offline"})

# (fnmatch pattern on the lower-cased bare model id, format); first match wins.
FORMAT_TABLE: tuple[tuple[str, str], ...] = (
    ("claude-*", "anthropic"),
    ("*llama-2*", "llama2"),
    ("*llama2*", "llama2"),
    ("davinci-*", "text"),
    ("babbage-*", "text"),
    ("text-*", "text"),
    ("*", "openai"),  # gpt-*, o1*, o3*, qwen*, and OpenAI-compatible servers
)
FORMATS = ("anthropic", "openai", "llama2", "text")


@dataclass(frozen=True)
class ModelRef:
    """``anthropic:claude-sonnet-4-6`` / ``openai:qwen2-7b@http://…`` / a bare id."""

    raw: str
    provider: str | None
    model_id: str
    base_url: str | None

    @property
    def offline(self) -> bool:
        return self.provider == "offline"


def parse_model(model: str) -> ModelRef:
    text = model.strip()
    if not text:
        raise PromptError("model id is empty; pass e.g. --model anthropic:claude-sonnet-4-6")
    provider: str | None = None
    head, sep, rest = text.partition(":")
    if sep and head in KNOWN_PROVIDERS:
        provider, text = head, rest
    base_url: str | None = None
    if "@" in text:
        text, _, base_url = text.partition("@")
    return ModelRef(model, provider, text, base_url)


def format_for(ref: ModelRef) -> str:
    if ref.offline:
        return "openai"
    mid = ref.model_id.lower()
    for pattern, fmt in FORMAT_TABLE:
        if fnmatchcase(mid, pattern):
            return fmt
    return "openai"  # pragma: no cover - the table ends with "*"


def check_alternation(messages: Sequence[Message]) -> None:
    """Roles must go user, assistant, user, ... (the Llama 2 template raises otherwise)."""
    for i, m in enumerate(messages):
        expected = "user" if i % 2 == 0 else "assistant"
        if m.role != expected:
            raise PromptError(
                f"conversation roles must alternate user/assistant/user/...: message {i + 1} is "
                f"{m.role!r}, expected {expected!r}; fix the history (it must start with a user "
                "turn and end with an assistant turn)"
            )


def llama2_prompt(system: str | None, messages: Sequence[Message]) -> str:
    """The string Meta's Llama-2-chat template renders (seed 001), without tokenising."""
    check_alternation(messages)
    parts: list[str] = []
    for i, m in enumerate(messages):
        content = m.content
        if i == 0 and system is not None:
            content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content
        if m.role == "user":
            parts.append("<s>[INST] " + content.strip() + " [/INST]")
        else:
            parts.append(" " + content.strip() + " </s>")
    return "".join(parts)


def text_prompt(system: str | None, messages: Sequence[Message]) -> str:
    """A plain transcript: system text, earlier turns as ``User:``/``Assistant:``, last user
    content as is (the seeds' plain templates end with their own ``Assistant:`` cue)."""
    check_alternation(messages)
    parts = [system] if system else []
    for m in messages[:-1]:
        parts.append(("User: " if m.role == "user" else "Assistant: ") + m.content)
    if messages:
        parts.append(messages[-1].content)
    return "\n\n".join(parts)


def _anthropic(model: str, system: str | None, messages: Sequence[Message]) -> dict[str, Any]:
    payload: dict[str, Any] = {"model": model}
    if system is not None:
        payload["system"] = [
            {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
        ]
    payload["messages"] = [{"role": m.role, "content": m.content} for m in messages]
    return payload


def _openai(model: str, system: str | None, messages: Sequence[Message]) -> dict[str, Any]:
    msgs: list[dict[str, str]] = []
    if system is not None:
        msgs.append({"role": "system", "content": system})
    msgs += [{"role": m.role, "content": m.content} for m in messages]
    return {"model": model, "messages": msgs}


def _llama2(model: str, system: str | None, messages: Sequence[Message]) -> dict[str, Any]:
    return {"model": model, "prompt": llama2_prompt(system, messages)}


def _text(model: str, system: str | None, messages: Sequence[Message]) -> dict[str, Any]:
    return {"model": model, "prompt": text_prompt(system, messages)}


# format -> (payload builder, single-string renderer or None)
PayloadBuilder = Callable[[str, str | None, Sequence[Message]], dict[str, Any]]
TextRenderer = Callable[[str | None, Sequence[Message]], str]
RENDERERS: dict[str, tuple[PayloadBuilder, TextRenderer | None]] = {
    "anthropic": (_anthropic, None),
    "openai": (_openai, None),
    "llama2": (_llama2, llama2_prompt),
    "text": (_text, text_prompt),
}
