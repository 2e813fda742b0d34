"""The offline baseline's answers to the pipeline's rewrite and summary prompts.

``offline:extractive`` routes a request of purpose ``rewrite`` / ``summary`` here
(:mod:`app.baselines.tasks`), so an offline run renders these prompts, calls the
engine and records prompt versions and token counts exactly as a model run does; only the
reply comes from a deterministic algorithm instead of a model:

* ``rewrite/standalone`` (variables ``history``, ``question``): the JSON the prompt asks for,
  ``{"original": question, "rewritten": offline_rewrite(question, conversation)}``;
* ``rewrite/disambiguate_*`` (variables ``chat_history``, ``input``): the rewritten question
  as one line;
* ``summary/*`` (variables ``summary``, ``new_lines``): :func:`offline_summary`'s line.

The conversation is the whole history the pipeline passes in ``metadata["history"]`` (a JSON
list of ``{"role", "content"}``): the ``history`` variable is clipped for a model's context,
and the baseline reads the full turns. Without it (``rag prompts test`` on a prompt's
fixtures) the conversation is read back from the prompt's own variable (``history`` /
``chat_history``): lines ``用户|User|Human: …`` and ``助手|Assistant: …``, an optional leading
``[label]`` dropped, other lines continuing the message before; turns labelled newest first
(``[倒数第1轮]``, ``[turn -1]``, as the pipeline writes them) are put back in order.
"""

from __future__ import annotations

import json
import re

from app.errors import ProviderError, UserError
from app.generation.pipeline.memory import offline_summary
from app.generation.pipeline.rewrite import offline_rewrite
from app.llm.types import ChatRequest, Message, Role, coerce_history

PROVIDER = "offline:extractive"


def _conversation(request: ChatRequest) -> tuple[Message, ...]:
    raw = request.metadata.get("history")
    if not raw:
        return ()
    try:
        data = json.loads(raw)
        if not isinstance(data, list):
            raise UserError("expected a list")
        return coerce_history(data, source="metadata['history']")
    except (json.JSONDecodeError, UserError) as exc:
        raise ProviderError(
            f"{PROVIDER}: metadata['history'] is not a JSON list of messages: {exc}",
            provider=PROVIDER,
        ) from None


_SPEAKER = re.compile(
    r"^(?:\[[^\]]*\]\s*)?(用户|人类|User|Human|助手|Assistant|AI)\s*[:：]\s?(.*)$"
)
_NEWEST_FIRST = re.compile(r"^\[(?:倒数第|turn -)")
_ENTITY_LINE = ("对话中提到的关键实体：", "Entities mentioned in the conversation: ")


def conversation_from_text(text: str) -> tuple[Message, ...]:
    """The messages written in a prompt's history variable (see the module docstring)."""
    turns: list[list[Message]] = []
    newest_first = False
    for line in text.splitlines():
        if not line.strip() or line.startswith(_ENTITY_LINE):
            continue
        match = _SPEAKER.match(line.strip())
        if match is None:
            if turns and turns[-1]:
                last = turns[-1][-1]
                turns[-1][-1] = Message(last.role, f"{last.content}\n{line}")
            continue
        newest_first = newest_first or bool(_NEWEST_FIRST.match(line.strip()))
        role: Role = "user" if match.group(1) in ("用户", "人类", "User", "Human") else "assistant"
        if role == "user" or not turns:
            turns.append([])
        turns[-1].append(Message(role, match.group(2).strip()))
    if newest_first:
        turns.reverse()
    return tuple(m for turn in turns for m in turn)


def rewrite_reply(request: ChatRequest) -> str:
    """The reply to a rewrite prompt, in the format its contract asks for."""
    variables = request.variables
    conversation = _conversation(request)
    if "input" in variables:  # disambiguation: one plain line
        if "history" not in request.metadata:
            conversation = conversation_from_text(variables.get("chat_history", ""))
        return offline_rewrite(variables["input"], conversation)
    question = variables.get("question", "")
    if "history" not in request.metadata:
        conversation = conversation_from_text(variables.get("history", ""))
    rewritten = offline_rewrite(question, conversation)
    return json.dumps({"original": question, "rewritten": rewritten}, ensure_ascii=False)


def summary_reply(request: ChatRequest) -> str:
    """The reply to a summary prompt: the running summary with the new pair folded in."""
    return offline_summary(
        request.variables.get("summary", ""), request.variables.get("new_lines", "")
    )
