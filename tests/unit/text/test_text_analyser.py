"""The one analyser (app.text.analyser): terms of questions and documents.

Expected values are derived by hand from the rules in the module docstring and jieba's own
segmentation (``jieba.lcut``, shown in each comment), not copied from the function's output.
"""

from __future__ import annotations

import pytest

from app.text import STOPWORDS_EN, STOPWORDS_ZH, ensure_jieba, query_terms, stem, tokenize

# The architecture review (§4b) measured the two old analysers disagreeing on these four
# questions (retrieval | offline): ['travel','policie'] | ['travel','policy'];
# ['many','classe'] | ['class']; ['年假','天'] | ['年假']; ['我司','报销','流程'] | ['报销','流程'].
REVIEW_TABLE = [
    # what/are/the: stop words; policies → policy (ies → y)
    ("What are the travel policies?", ["travel", "policy"]),
    # how/many: stop words; classes → class (sses → ss)
    ("How many classes?", ["class"]),
    # jieba: 公司/的/年/假/有/多少/天/？ — 公司 的 有 多少 are stop words, so 年 and 假 form a
    # run of one-character words (→ the bigram 年假) and 天 stands alone (a lone single
    # character is kept: dropping it cost retrieval Hit@5 1.000 → 0.951 on smoke)
    ("公司的年假有多少天？", ["年假", "天"]),
    # jieba: 我司/报销/流程/是/什么 — 我司 (domain-generic), 是, 什么 are stop words
    ("我司报销流程是什么", ["报销", "流程"]),
]


@pytest.mark.parametrize(("question", "terms"), REVIEW_TABLE)
def test_review_table(question: str, terms: list[str]) -> None:
    assert tokenize(question) == terms


@pytest.mark.parametrize(("question", "terms"), REVIEW_TABLE)
def test_retrieval_and_offline_baselines_use_the_same_terms(
    question: str, terms: list[str]
) -> None:
    from app.baselines.extractive import question_terms
    from app.retrieval import index

    assert index.tokenize(question) == terms  # what Retriever.search analyses a query with
    assert question_terms(question) == terms
    assert query_terms(question) == terms


def test_jieba_segmentation_the_table_relies_on() -> None:
    jieba = ensure_jieba()
    assert jieba.lcut("公司的年假有多少天？") == [
        "公司",
        "的",
        "年",
        "假",
        "有",
        "多少",
        "天",
        "？",
    ]
    assert jieba.lcut("我司报销流程是什么") == ["我司", "报销", "流程", "是", "什么"]
    assert ensure_jieba() is jieba  # loaded once


def test_document_side_adds_characters_and_bigrams_of_segments() -> None:
    # jieba: 我司/报销/流程/是/什么 → segment 报销流程 between stop words: its words, then
    # the bigrams not yet emitted (销流), then its characters
    assert tokenize("我司报销流程是什么", query=False) == [
        "报销", "流程", "销流", "报", "销", "流", "程"
    ]  # fmt: skip


def test_fullwidth_and_hyphens_are_normalised() -> None:
    # ＶＰＮ → vpn (NFKC + casefold); Wi-Fi → wifi; Ｅ-mail → email
    assert tokenize("ＶＰＮ Wi-Fi Ｅ-mail") == ["vpn", "wifi", "email"]


@pytest.mark.parametrize(
    ("word", "stemmed"),
    [
        ("policies", "policy"),
        ("classes", "class"),
        ("costs", "cost"),
        ("days", "day"),
        ("bus", "bus"),
        ("status", "status"),
        ("analysis", "analysis"),
        ("pass", "pass"),
        ("its", "its"),
    ],
)
def test_stem(word: str, stemmed: str) -> None:
    assert stem(word) == stemmed


def test_get_is_not_a_term() -> None:
    # full-170: "get" matched an English product page ("Severity 1 incidents get a first
    # response") and pushed the Chinese laptop page out of the top 5
    # which / do: stop words; engineers → engineer
    assert tokenize("Which laptop do engineers get?") == ["laptop", "engineer"]
    assert tokenize("Severity 1 incidents get a first response") == [
        "severity",
        "1",
        "incident",
        "first",
        "response",
    ]


def test_fallback_terms_when_every_word_is_a_stop_word() -> None:
    # jieba: 有/什么/吗/？ — all stop words, no term; the fallback takes the single characters
    # that are not stop words themselves: 有 吗 are, 么 is, 什 is not
    assert tokenize("有什么吗？") == []
    assert query_terms("有什么吗？") == ["什"]
    # a question with a term does not fall back
    assert query_terms("年假有几天") == ["年假"]


def test_one_stop_word_list_per_language() -> None:
    assert {"公司", "我司", "贵司", "的", "什么", "多少"} <= STOPWORDS_ZH
    assert {"the", "many", "much", "how"} <= STOPWORDS_EN
    # the light verb "get" says nothing about which page answers (like do / have)
    assert {"get", "gets", "got", "getting"} <= STOPWORDS_EN
    assert not STOPWORDS_ZH & STOPWORDS_EN
    assert all(" " not in w and "？" not in w for w in STOPWORDS_ZH)
