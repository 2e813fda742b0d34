"""The variable contracts of the prompt categories: ONE table, read by the checker and docs.

A contract is matched by category and slug pattern (first match wins). ``required`` must all
appear as placeholders; with ``exact`` nothing else may; otherwise only ``optional`` names
may appear besides them. ``declared`` contracts (judges) take their set from the module's
``VARIABLES`` constant, which must equal the placeholders. ``qa`` prompts must carry
``REJECTION_TRIGGER_KEYWORDS``, ``REJECTION_ANSWER`` and a ``CANARY``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase


@dataclass(frozen=True)
class Contract:
    name: str
    category: str
    slugs: tuple[str, ...]
    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    exact: bool = False
    declared: bool = False
    qa: bool = False
    purpose: str = "other"  # ChatRequest.purpose

    def describe(self) -> str:
        if self.declared:
            return "the set declared in VARIABLES"
        req = ", ".join(sorted(self.required))
        if self.exact:
            return f"exactly {{{req}}}"
        opt = ", ".join(sorted(self.optional))
        return f"{{{req}}}" + (f" plus optionally {{{opt}}}" if opt else "")


def _fs(*names: str) -> frozenset[str]:
    return frozenset(names)


CONTRACTS: tuple[Contract, ...] = (
    # retrieval QA (seed 000): question, chat_history, context
    Contract(
        "retrieval-qa",
        "system",
        ("retrieval_qa_*",),
        _fs("question", "chat_history", "context"),
        exact=True,
        qa=True,
        purpose="generation",
    ),
    # KB QA and the score-aware strict/assisted modes: documents + question, history optional
    Contract(
        "kb-qa",
        "system",
        ("kb_qa", "kb_strict", "kb_mode_strict", "kb_mode_assisted"),
        _fs("question", "context"),
        _fs("chat_history", "company_name"),
        qa=True,
        purpose="generation",
    ),
    # seed 002 refusal mode: the context is physically emptied
    Contract(
        "kb-refusal",
        "system",
        ("kb_mode_refusal",),
        _fs("question"),
        _fs("company_name", "hotline"),
        qa=True,
        purpose="generation",
    ),
    Contract(
        "summary", "summary", ("*",), _fs("summary", "new_lines"), exact=True, purpose="summary"
    ),
    Contract(
        "disambiguation",
        "rewrite",
        ("disambiguate_*",),
        _fs("chat_history", "input"),
        exact=True,
        purpose="rewrite",
    ),
    Contract(
        "standalone-rewrite",
        "rewrite",
        ("standalone",),
        _fs("history", "question"),
        exact=True,
        purpose="rewrite",
    ),
    Contract(
        "multi-query",
        "rewrite",
        ("multi_query",),
        _fs("question"),
        _fs("n", "history"),
        purpose="rewrite",
    ),
    Contract(
        "classify",
        "classify",
        ("*",),
        _fs("question"),
        _fs("history", "labels"),
        purpose="classify",
    ),
    Contract("judge", "judge", ("*",), declared=True, purpose="judge"),
    Contract("safety", "safety", ("*",), _fs("text"), _fs("policy"), purpose="safety"),
)

# fixture keys that are not template variables
FIXTURE_META_KEYS = frozenset({"expected_phrases", "description", "history", "model"})
# fixture key -> the variable it fills (seed 004 uses `context_excerpt` for `context`)
FIXTURE_ALIASES = {"context_excerpt": "context"}


def contract_for(category: str, slug: str) -> Contract | None:
    for contract in CONTRACTS:
        if contract.category == category and any(fnmatchcase(slug, p) for p in contract.slugs):
            return contract
    return None
