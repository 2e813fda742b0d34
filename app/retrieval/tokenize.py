"""The analyser shared by indexing and querying (one function, so both sides agree).

* Text is NFKC-normalised (full-width letters/digits become ASCII) and case-folded.
* Runs of CJK characters are segmented with jieba in search mode (``cut_for_search``: long
  words also yield their sub-words, 差旅费 → 差旅, 旅费, 差旅费). Jieba does not always cut
  the same word the same way (年假有几天 → 年/假, 员工年假为 → 年/假为), so the two sides differ:
  a **document** also gets every character and character bigram of its stop-word-free
  segments; a
  **query** turns each run of one-character words into its bigrams (年/假 → 年假) instead
  of keeping the unreliable single characters. Junk cross-word bigrams are thus only on
  the document side, where they cannot lower a query's coverage score.
* Latin runs are split into ``[a-z0-9]+`` words; a small stop-word list is dropped; a plural
  ``s`` is stripped from words longer than 3 letters (a deliberately tiny stemmer).
* Chinese function and question words (的, 了, 吗, 什么, 多少, 如何 …) are dropped: they would
  otherwise dominate the query side of the [0, 1] score normalisation in :mod:`.bm25`.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from functools import lru_cache

ANALYSER_VERSION = "1"

_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_LATIN = re.compile(r"[a-z0-9]+")
_HYPHENATED = re.compile(r"(?<=[a-z])-(?=[a-z])")
_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")

_ZH_TEXT = """
的 了 吗 呢 吧 啊 呀 是 在 和 与 及 或 也 都 就 还 又 被 把 对 从 向 给 让 之 其 而 并 等 我 你 他 她 它 我们 你们 他们 她们 它们 咱们 这
那 这个 那个 这些 那些 该 此 哪 哪个 哪些 什么 怎么 怎样 怎么样 如何 多少 几 几个 为什么 为何 是否 是不是 能否 可以 能 会 要 需要 应该 请 请问 一下
一个 有 没有 几天 几年 几次 多少钱 多少天 多长时间 怎么办 吗 吗？ 呢？ 么 嘛 哦 个 些 啥 谁 哪里 哪儿 时候 多久 多长 一些 以及 关于 公司 的话 所以
因为 如果 但是 然后 自己
"""
ZH_STOPWORDS = frozenset(_ZH_TEXT.split())
_EN_TEXT = """
a an the and or of to in on at for from by with about as is are was were be been being do
does did doing have has had i me my we our you your he she it its they them their this
that these those what which who whom whose when where why how can could should would will
shall may might must there here than then so if not no yes any all some please tell
"""
EN_STOPWORDS = frozenset(_EN_TEXT.split())


@lru_cache(maxsize=1)
def ensure_jieba() -> object:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def _cjk_tokens(run: str, query: bool) -> list[str]:
    jieba = ensure_jieba()
    out: list[str] = []
    segment = ""  # consecutive non-stop-words; bigrams never span a stop word
    singles: list[str] = []  # a run of one-character words (query side)

    def flush_singles() -> None:
        if len(singles) >= 2:
            run = "".join(singles)
            out.extend(g for g in (run[i : i + 2] for i in range(len(run) - 1)) if g not in out)
        else:
            out.extend(singles)
        singles.clear()

    for word in jieba.cut(run):  # type: ignore[attr-defined]
        if word in ZH_STOPWORDS:
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
        out.extend(w for w in jieba.cut_for_search(word) if w not in ZH_STOPWORDS)  # type: ignore[attr-defined]
    flush_singles()
    if not query:
        out.extend(_bigrams(segment, out))
    return out


def _bigrams(segment: str, seen: list[str]) -> list[str]:
    """Document side: the segment's characters and character bigrams not yet emitted."""
    grams = [segment[i : i + 2] for i in range(len(segment) - 1)]
    grams += list(segment) if len(segment) > 1 else []
    return [g for g in dict.fromkeys(grams) if g not in ZH_STOPWORDS and g not in seen]


def _latin_tokens(text: str) -> list[str]:
    out: list[str] = []
    for word in _LATIN.findall(text):
        if word in EN_STOPWORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


@lru_cache(maxsize=8192)
def _tokenize_cached(text: str, query: bool) -> tuple[str, ...]:
    norm = unicodedata.normalize("NFKC", text).casefold()
    norm = _HYPHENATED.sub("", norm)  # wi-fi → wifi, e-mail → email
    tokens: list[str] = []
    pos = 0
    for match in _CJK_RUN.finditer(norm):
        tokens.extend(_latin_tokens(norm[pos : match.start()]))
        tokens.extend(_cjk_tokens(match.group(0), query))
        pos = match.end()
    tokens.extend(_latin_tokens(norm[pos:]))
    return tuple(tokens)


def tokenize(text: str, *, query: bool = True) -> list[str]:
    """Terms of ``text``: query side by default, ``query=False`` for indexed documents."""
    return list(_tokenize_cached(text, query))


def has_cjk(text: str) -> bool:
    """True when ``text`` contains a CJK ideograph (used to pick zh/en wording)."""
    return bool(_CJK_CHAR.search(text))
