"""Chat formats: one table from model id to format, one renderer per single-string format.

=========  =====================================================================
anthropic  ``system`` + messages (the Anthropic provider sends the system prompt as
           one text block marked cacheable)
openai     ``system`` + messages (the OpenAI provider sends a ``system`` message first)
llama2     one string, byte-identical to Meta's Llama-2-chat ``chat_template``
text       one plain string (a plain transcript)
=========  =====================================================================

The model string is parsed by :func:`app.llm.providers.families.parse_model` (the one parser); the body
sent on the wire is built by the provider (:func:`app.llm.providers.request_payload`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from fnmatch import fnmatchcase

from app.errors import PromptError
from app.llm.spec import ModelRef
from app.llm.types import Message

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


def format_for(ref: ModelRef) -> str:
    """The chat format for a parsed model string (offline baselines read the chat form)."""
    if ref.offline:
        return "openai"
    return _format_of(ref.model.lower())


@functools.lru_cache(maxsize=256)
def _format_of(mid: str) -> str:
    """The table's format for a lower-cased bare model id (a pure function of the id: a run
    renders for the same few models case after case)."""
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


TextRenderer = Callable[[str | None, Sequence[Message]], str]
# format -> the single-string renderer (None: a chat format, sent as system + messages).
# The wire body itself is the provider's (app.llm.providers.request_payload), never built here.
RENDERERS: dict[str, TextRenderer | None] = {
    "anthropic": None,
    "openai": None,
    "llama2": llama2_prompt,
    "text": text_prompt,
}
