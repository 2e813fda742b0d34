"""The offline baseline's answers to the pipeline's own prompts: rewrite and summary.

The pipeline calls its rewrite and summary prompts through the engine with whatever model
it runs, offline or not (the same rendering, engine, cache and trace path). When that
model is ``offline:extractive`` the request reaches this table instead of the extractive
answerer, chosen by what the prompt's contract puts in the request:

=====================  =================================  ===================================
request                contract                           answer
=====================  =================================  ===================================
purpose ``rewrite``,   ``standalone-rewrite``             ``{"original", "rewritten"}`` JSON
variable ``question``  (``rewrite/standalone``)           from the offline rewriter
purpose ``rewrite``,   ``disambiguation``                 the rewritten question, one line
variable ``input``     (``rewrite/disambiguate_*``)
purpose ``summary``    ``summary`` (``summary/*``)        the running one-line summary
=====================  =================================  ===================================

The algorithms themselves are the pipeline's documented deterministic baselines
(:func:`app.generation.pipeline.rewrite.offline_rewrite`, ``memory.offline_summary``); they
are loaded by name on first use, like the provider classes. Their completions' request ids
start ``baseline-rewriter-`` / ``baseline-summariser-``: never a model's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from app.llm.types import ChatRequest

Task = Callable[[ChatRequest], str]

# name -> "module:function"; each function maps a ChatRequest to the reply text
_TASKS: dict[str, str] = {
    "rewriter": "app.baselines.replies:rewrite_reply",
    "summariser": "app.baselines.replies:summary_reply",
}


def task_name(request: ChatRequest) -> str | None:
    """Which offline algorithm answers ``request`` (None: the extractive answerer)."""
    if request.purpose == "rewrite":
        return "rewriter"
    if request.purpose == "summary":
        return "summariser"
    return None


def load_task(name: str) -> Task:
    module_name, _, func = _TASKS[name].partition(":")
    task: Task = getattr(importlib.import_module(module_name), func)
    return task
