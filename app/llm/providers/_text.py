"""The analyser shared by the offline baselines: tokens, sentences, refusals.

* Text containing CJK characters is segmented with jieba (``jieba.lcut``, loaded lazily,
  once per process); runs of single characters jieba leaves (年 / 假) are re-joined and
  turned into character bigrams (年假). Other text goes through a plain lowercase
  ``[a-z0-9]+`` word analyser with a plural strip (costs → cost, policies → policy).
* Content terms drop punctuation, a short stop-word list per language, single letters
  and citation markers ``[n]``.
* Matching (:class:`Matcher`): a CJK term (or a one-character term) is found in a text
  when it is a substring of it (so a segmentation difference does not hide 年假 inside
  带薪年假); other terms must match a whole token.
* The Chinese stop words include the domain-generic 公司 / 我司 (every KB text is about
  the company, so it says nothing about which sentence answers).
* A refusal is recognised by the phrases in :data:`REFUSAL_MARKERS` (the prompts'
  rejection keywords plus common English forms).
"""

from __future__ import annotations

import collections
import functools
import logging
import re
from typing import Any

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}")
_WORD = re.compile(r"[a-z0-9]+(?:[.'][a-z0-9]+)*")
_CITATION = re.compile(r"\[\d+\]")
_SENTENCE = re.compile(r"[^。！？!?\n]+(?:[。！？!?]+|\n|$)|(?<=[。！？!?])\s*")
_EN_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS_EN = _words(
    """a an the and or but if of to in on at for from by with without about as into is are
    was were be been being do does did done have has had having i you he she it we they me
    my your our their its this that these those there here what which who whom whose when
    where why how can could should would may might will shall must not no so than then too
    very just also any all some each per please tell me us much many"""
)
STOPWORDS_ZH = _words(
    """的 了 是 在 和 与 及 或 也 就 都 而 吗 呢 吧 啊 呀 么 我 你 他 她 它 我们 你们 他们 这 那
    这个 那个 这些 那些 什么 怎么 怎样 如何 哪些 哪个 哪里 多少 几 请问 请 一下 有 有没有 没有
    是否 可以 能 能否 会 要 需要 对 把 被 给 从 到 为 为了 以及 等 其 之 个 中 上 下 几天 多久
    多长 为什么 哪儿 分别 时候 什么时候 怎么样 能不能 可不可以 公司 我司 贵司"""
)
REFUSAL_MARKERS = (
    "无法回答",
    "无法提供",
    "无法找到",
    "无法确定",
    "没有找到",
    "未找到",
    "没有相关",
    "暂无相关",
    "不知道",
    "抱歉",
    "超出知识库",  # not bare 超出: "超出部分由个人承担" is a policy, not a refusal
    "超出范围",
    "cannot answer",
    "can't answer",
    "unable to answer",
    "not able to answer",
    "do not contain",
    "does not contain",
    "don't know",
    "do not know",
    "no relevant information",
    "not in the provided",
    "i'm sorry",
    "sorry,",
)
DEFAULT_REFUSAL_ZH = "抱歉，根据现有资料无法回答该问题。"
DEFAULT_REFUSAL_EN = "Sorry, I cannot answer this question from the provided documents."


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


@functools.cache
def _jieba() -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def _keep(tok: str) -> bool:
    if not tok or not any(ch.isalnum() for ch in tok):
        return False
    if tok in STOPWORDS_EN or tok in STOPWORDS_ZH:
        return False
    return len(tok) > 1 or tok.isdigit()


def _stem(word: str) -> str:
    """A plural strip, enough for costs/cost, policies/policy, classes/class."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("sses"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def normalise(text: str) -> str:
    return _CITATION.sub(" ", text).lower()


def tokens(text: str) -> list[str]:
    """Content terms in order (lowercased, stop words and punctuation removed)."""
    text = normalise(text)
    if not has_cjk(text):
        return [_stem(t) for t in _WORD.findall(text) if _keep(t)]
    out: list[str] = []
    run: list[str] = []
    for tok in [*(t.strip() for t in _jieba().lcut(text)), ""]:
        if len(tok) == 1 and has_cjk(tok) and tok not in STOPWORDS_ZH:
            run.append(tok)  # jieba split a word into characters: re-join as bigrams
            continue
        if len(run) >= 2:
            joined = "".join(run)
            out.extend(joined[i : i + 2] for i in range(len(joined) - 1))
        run = []
        if _keep(tok):
            out.append(_stem(tok) if tok.isascii() else tok)
    return out


class Matcher:
    """Finds terms in one text: CJK terms as substrings, other terms as whole tokens."""

    def __init__(self, text: str) -> None:
        self.text = normalise(text)
        self.tokens = tokens(text)
        self._counts = collections.Counter(self.tokens)

    def count(self, term: str) -> int:
        if has_cjk(term) or len(term) == 1:
            return self.text.count(term)
        return self._counts[term]

    def __contains__(self, term: str) -> bool:
        return self.count(term) > 0


def fallback_terms(text: str) -> list[str]:
    """Terms of a question with no content term left (能用 U 盘吗？): its single
    non-stop-word CJK characters and words, matched as substrings."""
    text = normalise(text)
    chars = [ch for ch in text if has_cjk(ch) and ch not in STOPWORDS_ZH]
    return chars + [w for w in _WORD.findall(text) if w not in STOPWORDS_EN]


def sentences(text: str) -> list[str]:
    """Split into sentences at 。！？!? (kept attached), newlines and ". " before a capital;
    semicolons do not split (a clause after ； usually belongs to the same rule)."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        for piece in _SENTENCE.findall(line):
            for part in _EN_SPLIT.split(piece):
                part = part.strip()
                if part and any(ch.isalnum() for ch in part):
                    out.append(part)
    return out


def is_refusal(text: str) -> bool:
    low = text.lower()
    return any(marker in low for marker in REFUSAL_MARKERS)


def default_refusal(question: str) -> str:
    return DEFAULT_REFUSAL_ZH if has_cjk(question) else DEFAULT_REFUSAL_EN


NUMBER = re.compile(r"\d+(?:\.\d+)?")
