"""The offline baseline's answers to the pipeline's rewrite and summary prompts.

``offline:extractive`` routes a request of purpose ``rewrite`` / ``summary`` here
(:mod:`app.llm.providers.offline_tasks`), so an offline run renders these prompts, calls the
engine and records prompt versions and token counts exactly as a model run does; only the
reply comes from a deterministic algorithm instead of a model:

* ``rewrite/standalone`` (variables ``history``, ``question``): the JSON the prompt asks for,
  ``{"original": question, "rewritten": offline_rewrite(question, conversation)}``;
* ``rewrite/disambiguate_*`` (variables ``chat_history``, ``input``): the rewritten question
  as one line;
* ``summary/*`` (variables ``summary``, ``new_lines``): :func:`offline_summary`'s line.

The conversation is the whole history the pipeline passes in ``metadata["history"]`` (a JSON
list of ``{"role", "content"}``): the ``history`` variable is clipped for a model's context,
and the baseline reads the full turns. Without it the question is kept as is.
"""

from __future__ import annotations

import json

from app.errors import ProviderError, UserError
from app.generation.pipeline.memory import offline_summary
from app.generation.pipeline.rewrite import offline_rewrite
from app.llm.types import ChatRequest, Message, coerce_history

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


def rewrite_reply(request: ChatRequest) -> str:
    """The reply to a rewrite prompt, in the format its contract asks for."""
    variables = request.variables
    if "input" in variables:  # disambiguation: one plain line
        return offline_rewrite(variables["input"], _conversation(request))
    question = variables.get("question", "")
    rewritten = offline_rewrite(question, _conversation(request))
    return json.dumps({"original": question, "rewritten": rewritten}, ensure_ascii=False)


def summary_reply(request: ChatRequest) -> str:
    """The reply to a summary prompt: the running summary with the new pair folded in."""
    return offline_summary(
        request.variables.get("summary", ""), request.variables.get("new_lines", "")
    )
