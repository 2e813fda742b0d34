"""The one analyser: the terms of a text, for retrieval, the offline baselines and judges.

* Text is normalised with :func:`app.text.normalise.fold` (NFKC + casefold); a hyphen
  between letters is dropped (wi-fi → wifi, e-mail → email).
* Runs of CJK characters are segmented with jieba (loaded lazily, once per process: see
  :func:`ensure_jieba`) in search mode (``cut_for_search``: long words also yield their
  sub-words, 差旅费 → 差旅, 旅费, 差旅费). Jieba does not always cut the same word the same
  way (年假有几天 → 年/假, 员工年假为 → 年/假为), so the two sides differ:

  * a **query** (``query=True``, the default; also what the offline baselines call a
    question's or an answer's *content terms*) turns each run of one-character words into
    its character bigrams (年/假 → 年假) instead of keeping the unreliable single
    characters; a lone one-character word is kept;
  * a **document** (``query=False``, what is indexed) also gets every character and
    character bigram of its stop-word-free segments. Junk cross-word bigrams are thus only
    on the document side, where they cannot lower a query's coverage score.

* Latin runs are split into ``[a-z0-9]+`` words, stop words dropped, and plurals stripped
  by :func:`stem` (costs → cost, policies → policy, classes → class; bus, status, analysis
  unchanged).
* Stop words are :mod:`app.text.stopwords` (one Chinese, one English list); bigrams never
  span a stop word.

:data:`ANALYSER_VERSION` names these rules; bump it when a change moves the terms.
"""

from __future__ import annotations

import functools
import logging
import re
from types import ModuleType

from app.text.normalise import fold
from app.text.segcache import lookup as kept_tokens
from app.text.segcache import store as keep_tokens
from app.text.stopwords import STOPWORDS_EN, STOPWORDS_ZH

# 2: one analyser for retrieval and the offline baselines; 3: "get" a stop word (2026-12)
ANALYSER_VERSION = "3"

# the CJK ideographs (ext. A, unified, compatibility): a regex class body, the one home of it
CJK_CLASS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
_CJK_CHAR = re.compile(f"[{CJK_CLASS}]")
_LATIN = re.compile(r"[a-z0-9]+")
_HYPHENATED = re.compile(r"(?<=[a-z])-(?=[a-z])")


def has_cjk(text: str) -> bool:
    """True when ``text`` contains a CJK ideograph (used to pick zh/en wording)."""
    return _CJK_CHAR.search(text) is not None


@functools.cache
def ensure_jieba() -> ModuleType:
    """The jieba module, its dictionary loaded (once per process).

    * jieba's ``_compat`` imports ``pkg_resources`` (≈ 0.5 s) only to open its own
      dictionary file; with that import refused it opens the file by path (its own
      fallback), so it is imported with ``pkg_resources`` hidden.
    * jieba's prefix dictionary is read from the compact per-checkout file of
      :mod:`app.text.dictionary` (looked up entry by entry: ≈ 5 MB instead of jieba's
      ≈ 70 MB dict, no 1.2 s load). Only when that file cannot be made or read does jieba
      load its own: jieba parses the dictionary once per machine and keeps the result in
      a cache file, under ``$RAG_CACHE_DIR/jieba`` when that is set, else jieba's default
      (the system temp folder). app.text is the ground floor, so it reads the variable
      itself rather than importing app.paths.
    """
    import os
    import sys

    hidden = "pkg_resources" not in sys.modules
    if hidden:
        sys.modules["pkg_resources"] = None  # type: ignore[assignment]  # ImportError
    try:
        import jieba
    finally:
        if hidden:
            del sys.modules["pkg_resources"]
    jieba.setLogLevel(logging.WARNING)
    env = os.environ.get("RAG_CACHE_DIR")
    if env:
        folder = os.path.join(env, "jieba")
        try:
            os.makedirs(folder, exist_ok=True)
            jieba.dt.tmp_dir = folder
        except OSError:  # a read-only cache folder: jieba's default (the system temp folder)
            pass
    from app.text.dictionary import install

    if not install(jieba):  # the compact dictionary file (≈ 5 MB of memory instead of ≈ 70)
        jieba.initialize()
    module: ModuleType = jieba
    return module


def ensure_posseg() -> ModuleType:
    """``jieba.posseg`` (part-of-speech tagging), on :func:`ensure_jieba`'s tokenizer, with
    its word → tag table read from a compact per-checkout file
    (:func:`app.text.dictionary.posseg`: ≈ 50 MB less memory per process than jieba's own)."""
    from app.text.dictionary import posseg

    return posseg(ensure_jieba())


def stem(word: str) -> str:
    """A plural strip: policies → policy, classes → class, costs → cost; words ending in
    ss/us/is and words of 3 letters or fewer are left alone."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("sses"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _bigrams(segment: str, seen: list[str]) -> list[str]:
    """Document side: the segment's character bigrams and characters not yet emitted."""
    grams = [segment[i : i + 2] for i in range(len(segment) - 1)]
    grams += list(segment) if len(segment) > 1 else []
    return [g for g in dict.fromkeys(grams) if g not in STOPWORDS_ZH and g not in seen]


def _cjk_tokens(run: str, query: bool) -> list[str]:
    """The run's tokens: kept per machine by :mod:`app.text.segcache`, else from jieba."""
    kept = kept_tokens(run, query, ANALYSER_VERSION, STOPWORDS_ZH)
    if kept is not None:
        return list(kept)
    out = _jieba_tokens(run, query)
    keep_tokens(run, query, tuple(out))
    return out


def _jieba_tokens(run: str, query: bool) -> list[str]:
    jieba = ensure_jieba()
    out: list[str] = []
    segment = ""  # consecutive non-stop-words; bigrams never span a stop word
    singles: list[str] = []  # a run of one-character words (query side)

    def flush_singles() -> None:
        if len(singles) >= 2:
            joined = "".join(singles)
            grams = (joined[i : i + 2] for i in range(len(joined) - 1))
            out.extend(g for g in grams if g not in out)
        else:
            out.extend(singles)
        singles.clear()

    for word in jieba.cut(run):
        if word in STOPWORDS_ZH:
            if not query:
                out.extend(_bigrams(segment, out))
            flush_singles()
            segment = ""
            continue
        segment += word
        if query and len(word) == 1:
            singles.append(word)
            continue
        flush_singles()
        out.extend(w for w in jieba.cut_for_search(word) if w not in STOPWORDS_ZH)
    flush_singles()
    if not query:
        out.extend(_bigrams(segment, out))
    return out


def _latin_tokens(text: str) -> list[str]:
    return [stem(w) for w in _LATIN.findall(text) if w not in STOPWORDS_EN]


@functools.lru_cache(maxsize=8192)
def _tokenize_cached(text: str, query: bool) -> tuple[str, ...]:
    norm = _HYPHENATED.sub("", fold(text))
    tokens: list[str] = []
    pos = 0
    for match in _CJK_RUN.finditer(norm):
        tokens.extend(_latin_tokens(norm[pos : match.start()]))
        tokens.extend(_cjk_tokens(match.group(0), query))
        pos = match.end()
    tokens.extend(_latin_tokens(norm[pos:]))
    return tuple(tokens)


def tokenize(text: str, *, query: bool = True) -> list[str]:
    """Terms of ``text`` in order: query side by default, ``query=False`` for documents."""
    return list(_tokenize_cached(text, query))


def fallback_terms(text: str) -> list[str]:
    """Terms of a question with no content term left (能用 U 盘吗？): its single
    non-stop-word CJK characters and its non-stop-word Latin words."""
    norm = fold(text)
    chars = [ch for ch in norm if has_cjk(ch) and ch not in STOPWORDS_ZH]
    return chars + [w for w in _LATIN.findall(norm) if w not in STOPWORDS_EN]


def query_terms(text: str) -> list[str]:
    """A question's terms: :func:`tokenize` (query side), else :func:`fallback_terms`."""
    return tokenize(text) or fallback_terms(text)
