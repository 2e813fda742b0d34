"""The one normaliser and the keyword/term matchers (app.text.normalise, app.text.match)."""

from __future__ import annotations

import pytest

from app.text import (
    Matcher,
    canonical,
    contains,
    fold,
    has_cjk,
    nfkc,
    normalise,
    numbers,
    strip_citations,
    strip_invisible,
)


def test_normaliser_forms() -> None:
    # U+FF36 U+FF30 U+FF2E are FULLWIDTH LATIN CAPITAL V, P, N; NFKC maps them to ASCII
    assert nfkc("\uff36\uff30\uff2e\uff11\uff12") == "VPN12"
    assert fold("ＶＰＮ Straße") == "vpn strasse"  # casefold, not lower: ß → ss
    assert normalise("  年假\t\n 5 天  ") == "年假 5 天"
    assert strip_invisible("ig\u200bno\u00adre\ufeff") == "ignore"
    assert canonical("IG\u200bNORE   previous") == "ignore previous"
    assert normalise("IG\u200bNORE") != "ignore"  # normalise keeps invisibles; canonical drops


@pytest.mark.parametrize(
    ("haystack", "needle", "found"),
    [
        ("上限 132000 元", "32000", False),
        ("上限 32000 元", "32000", True),
        ("上限 32,000 元", "32000", True),
        ("上限 32000 元", "32,000", True),
        ("上限 600.5 元", "600", False),
        ("上限 600 元。", "600", True),
        ("单次 5000元", "5000 元", True),  # whitespace ignored on the second try
        ("ＶＰＮ 账号", "vpn", True),
        ("带薪年假", "年假", True),
    ],
)
def test_contains(haystack: str, needle: str, found: bool) -> None:
    assert contains(haystack, needle) is found


def test_numbers_and_citations() -> None:
    assert numbers("上限 32,000 元，或 1.5 倍[2]") == ["32000", "1.5"]
    assert strip_citations("年假 5 天[1]。").strip() == "年假 5 天 。"


def test_matcher_cjk_substring_other_terms_whole_tokens() -> None:
    m = Matcher("员工享有带薪年假 15 天，VPN 需申请[1]。")
    assert "年假" in m  # CJK: a substring, whatever jieba's cut of 带薪年假
    assert m.count("天") == 1
    assert "vpn" in m and "vp" not in m  # Latin: whole tokens only
    assert "15" in m and "5" not in m  # numbers whole
    assert "1" not in m  # the citation marker is not text


def test_collapse_spaces_is_the_whitespace_regex() -> None:
    """collapse_spaces splits with str.split; the definition is ``\\s+`` → one space, ends
    stripped. The two agree only if ``\\s`` and str.isspace are the same set of characters:
    checked over every code point, then on texts built from all of them."""
    import random
    import re
    import sys

    from app.text import collapse_spaces

    every = "".join(chr(i) for i in range(sys.maxunicode + 1) if not 0xD800 <= i < 0xE000)
    spaces = re.findall(r"\s", every)
    assert spaces == [c for c in every if c.isspace()]
    assert len(spaces) > 20  # not only ASCII: U+00A0, U+2003, U+3000, …
    rng = random.Random(14)
    alphabet = [*spaces, "a", "年", "\u200b", "x y"]
    for _ in range(3000):
        text = "".join(rng.choices(alphabet, k=rng.randint(0, 12)))
        assert collapse_spaces(text) == re.sub(r"\s+", " ", text).strip(), repr(text)


def test_matcher_membership_is_count_above_zero_on_the_knowledge_base() -> None:
    """``term in Matcher(text)`` answers ``count(term) > 0`` (CJK: a substring; other
    terms: a whole token) for every KB document and the terms of every suite question,
    their characters and pieces, and Latin words in and out of the texts."""
    from app.paths import kb_dir
    from app.text import query_terms
    from tests.support.suites import suite_questions

    docs = [p.read_text(encoding="utf-8") for p in sorted(kb_dir().rglob("*.md"))][:40]
    terms: set[str] = {"vpn", "wifi", "wi", "15", "5", "1", "oa", "年假", "假", "带薪年假年"}
    for question in suite_questions():
        for term in query_terms(question):
            terms |= {term, term[:1], term[1:]}
    found = 0
    for doc in docs:
        m = Matcher(doc)
        for term in terms:
            expected = (m.text.count(term) if has_cjk(term) else m.counts[term]) > 0
            assert (term in m) is expected, (term, doc[:30])
            found += expected
    assert found > 1000  # both answers occur many times


def test_nfkc_and_fold_are_unicodedatas_for_more_texts_than_are_kept() -> None:
    """nfkc keeps its last 512 texts: every answer is still unicodedata's NFKC (and fold's
    its casefold), first and second time, for texts that differ in one character."""
    import unicodedata

    texts = [f"第{i}条：年假（ＶＰＮ）{i % 7}ﬁ天，Straße Ⅻ" for i in range(700)]
    for _ in range(2):
        for text in texts:
            assert nfkc(text) == unicodedata.normalize("NFKC", text)
            assert fold(text) == unicodedata.normalize("NFKC", text).casefold()
    assert nfkc("［1］ＶＰＮ") == "[1]VPN" and fold("ＶＰＮ") == "vpn"
