"""Summary memory: keep the chat history within the token budget (seed 000, ColossalQA).

``ConversationBufferWithSummary.load_memory_variables`` re-done:

1. ``remain = max_tokens − prompt_length`` where ``prompt_length`` is the token count of the
   QA prompt rendered with this turn's documents and question and an empty history (the
   caller measures it; :class:`app.generation.pipeline.generator.Pipeline` does);
2. while the formatted history is longer than ``remain``, pop the **oldest** user/assistant
   pair into the to-summarise buffer; if **two or fewer** messages are left and it still
   does not fit (ColossalQA's ``len(messages) <= 2``: the newest pair is never summarised),
   raise :class:`~app.errors.BudgetExceeded` naming the numbers and the fix;
3. fold each popped pair into the running summary, oldest first, with the ``summary/``
   prompt (``summary`` + ``new_lines``), keeping only the first line of each answer
   (ColossalQA passes ``stop=["\\n\\n"]`` and takes the first line);
4. emit ``历史对话概要:\\n{summary}\\n最近的对话:\\n{recent}`` (English: ``A summarization of
   historical conversation:`` / ``Most recent conversation:``), or the plain history when
   nothing was summarised.

Tokens are counted with a :class:`app.llm.tokens.TokenCounter` (default BPE
``cl100k_base``); its ``name`` goes into the trace so a budget decision can be reproduced.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from app.errors import BudgetExceeded
from app.llm.tokens import TokenCounter
from app.llm.types import Message
from app.text.analyser import has_cjk

Language = Literal["zh", "en"]
LANGUAGES: tuple[Language, ...] = ("zh", "en")


def language_of(question: str) -> Language:
    """The language the pipeline answers ``question`` in (it picks the rewrite and summary
    prompts): ``zh`` when it contains CJK characters, else ``en``."""
    return "zh" if has_cjk(question) else "en"


# (existing_summary, new_lines) -> (new summary text, prompt version or None)
Summarizer = Callable[[str, str], Awaitable[tuple[str, str | None]]]

HEADERS: dict[Language, tuple[str, str]] = {
    "zh": ("历史对话概要:", "最近的对话:"),
    "en": ("A summarization of historical conversation:", "Most recent conversation:"),
}
PREFIXES: dict[Language, tuple[str, str]] = {
    "zh": ("用户", "Assistant"),
    "en": ("Human", "Assistant"),
}


def format_messages(messages: Sequence[Message], language: Language = "zh") -> str:
    """``用户: …\\nAssistant: …`` lines (ColossalQA's ``get_buffer_string``)."""
    human, ai = PREFIXES[language]
    return "\n".join(f"{human if m.role == 'user' else ai}: {m.content}" for m in messages)


@dataclass(frozen=True)
class MemoryResult:
    chat_history: str  # the string for a ``{chat_history}`` variable
    summary: str | None  # None when nothing was summarised
    recent: tuple[Message, ...]  # the messages kept verbatim, oldest first
    summarised_pairs: int
    history_tokens: int  # tokens of ``chat_history``
    budget_tokens: int  # ``remain``
    counter: str
    summary_prompt_version: str | None = None

    def as_messages(self, language: Language = "zh") -> tuple[Message, ...]:
        """The history as chat turns for prompts without ``{chat_history}``: the summary
        (with its header) is prefixed to the first kept user message."""
        if self.summary is None or not self.recent:
            return self.recent
        head, recent_head = HEADERS[language]
        first = self.recent[0]
        prefixed = Message(first.role, f"{head}\n{self.summary}\n{recent_head}\n{first.content}")
        return (prefixed, *self.recent[1:])


def first_line(text: str) -> str:
    """The first non-empty line (a summary is one line; stop at a blank line)."""
    for line in text.strip().split("\n\n", 1)[0].splitlines():
        if line.strip():
            return line.strip()
    return ""


class SummaryMemory:
    """Fits a chat history into ``remain`` tokens by recursive summarisation."""

    def __init__(
        self, counter: TokenCounter, summarize: Summarizer, language: Language = "zh"
    ) -> None:
        self.counter = counter
        self.summarize = summarize
        self.language = language

    def _length(self, messages: Sequence[Message]) -> int:
        return self.counter.count(format_messages(messages, self.language))

    async def load(
        self, history: Sequence[Message], max_tokens: int, prompt_length: int
    ) -> MemoryResult:
        remain = max_tokens - prompt_length
        buffer = list(history)
        popped: list[Message] = []
        while buffer and self._length(buffer) > remain:
            if len(buffer) <= 2:
                raise BudgetExceeded(
                    f"chat history does not fit: the newest {len(buffer)} message(s) need "
                    f"{self._length(buffer)} tokens but only {remain} of max_tokens={max_tokens} "
                    f"remain after the prompt (template + documents + question = "
                    f"{prompt_length} tokens, counter {self.counter.name}) — raise "
                    "PipelineConfig.max_tokens, retrieve fewer/smaller chunks, or shorten the "
                    "last turn"
                )
            popped.extend(buffer[:2])
            buffer = buffer[2:]
        summary: str | None = None
        version: str | None = None
        if popped:
            summary = ""
            for i in range(0, len(popped), 2):
                new_lines = format_messages(popped[i : i + 2], self.language)
                text, version = await self.summarize(summary, new_lines)
                summary = first_line(text) or summary
            head, recent_head = HEADERS[self.language]
            recent = format_messages(buffer, self.language)
            chat_history = f"{head}\n{summary}\n{recent_head}\n{recent}"
        else:
            chat_history = format_messages(buffer, self.language)
        return MemoryResult(
            chat_history=chat_history,
            summary=summary,
            recent=tuple(buffer),
            summarised_pairs=len(popped) // 2,
            history_tokens=self.counter.count(chat_history),
            budget_tokens=remain,
            counter=self.counter.name,
            summary_prompt_version=version,
        )


def offline_summary(summary: str, new_lines: str) -> str:
    """The deterministic offline summariser (a baseline, not a model): appends a clipped
    ``问 … / 答 …`` digest of the new pair to the running one-line summary. The offline
    provider answers the ``summary/`` prompt with it (:mod:`app.baselines.replies`)."""
    parts = []
    for line in new_lines.splitlines():
        _, _, content = line.partition(": ")
        content = " ".join(content.split())
        if content:
            parts.append(content[:40] + ("…" if len(content) > 40 else ""))
    digest = " → ".join(parts)
    return f"{summary}；{digest}" if summary else digest


async def offline_summarize(summary: str, new_lines: str) -> tuple[str, str | None]:
    """:func:`offline_summary` as a :data:`Summarizer` (no prompt version: no prompt)."""
    return offline_summary(summary, new_lines), None
