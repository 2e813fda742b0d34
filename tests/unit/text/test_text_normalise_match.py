"""The one normaliser and the keyword/term matchers (app.text.normalise, app.text.match)."""

from __future__ import annotations

import pytest

from app.text import (
    Matcher,
    canonical,
    contains,
    fold,
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
