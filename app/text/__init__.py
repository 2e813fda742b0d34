"""Text analysis, one home for it: normaliser, analyser, stop words, sentences, matching,
refusal markers.

The ground floor: imports nothing from ``app`` (but :mod:`app.errors`). Retrieval, the
offline providers, the metrics, the dataset checks and the suite builder all call these, so
a question has the same terms everywhere and a keyword is found the same way everywhere.

::

    normalise   nfkc, fold, strip_invisible, collapse_spaces, normalise, canonical, compact,
                alnum_key
    analyser    tokenize(text, query=True), query_terms, stem, has_cjk, ensure_jieba,
                ensure_posseg
    stopwords   STOPWORDS_ZH, STOPWORDS_EN
    sentences   sentences
    match       contains (keywords: numbers whole), mentions (plain markers), numbers,
                strip_citations,
                Matcher (terms in one text)
    refusal     REFUSAL_MARKERS, REFUSAL_MODES, UNCERTAIN_MARKERS, is_refusal,
                is_uncertain, is_rejection_answer, answer_refused, default_refusal
"""

from app.text.analyser import (
    ANALYSER_VERSION,
    ensure_jieba,
    ensure_posseg,
    fallback_terms,
    has_cjk,
    query_terms,
    stem,
    tokenize,
)
from app.text.match import Matcher, contains, contains_any, mentions, numbers, strip_citations
from app.text.normalise import (
    alnum_key,
    canonical,
    collapse_spaces,
    compact,
    fold,
    nfkc,
    normalise,
    strip_invisible,
)
from app.text.refusal import (
    DEFAULT_REFUSAL_EN,
    DEFAULT_REFUSAL_ZH,
    REFUSAL_MARKERS,
    REFUSAL_MODES,
    UNCERTAIN_MARKERS,
    answer_refused,
    default_refusal,
    is_refusal,
    is_rejection_answer,
    is_uncertain,
)
from app.text.sentences import sentences
from app.text.stopwords import STOPWORDS_EN, STOPWORDS_ZH

__all__ = [
    "ANALYSER_VERSION",
    "DEFAULT_REFUSAL_EN",
    "DEFAULT_REFUSAL_ZH",
    "REFUSAL_MARKERS",
    "REFUSAL_MODES",
    "STOPWORDS_EN",
    "STOPWORDS_ZH",
    "UNCERTAIN_MARKERS",
    "Matcher",
    "alnum_key",
    "answer_refused",
    "canonical",
    "collapse_spaces",
    "compact",
    "contains",
    "contains_any",
    "default_refusal",
    "ensure_jieba",
    "ensure_posseg",
    "fallback_terms",
    "fold",
    "has_cjk",
    "is_refusal",
    "is_rejection_answer",
    "is_uncertain",
    "mentions",
    "nfkc",
    "normalise",
    "numbers",
    "query_terms",
    "sentences",
    "stem",
    "strip_citations",
    "strip_invisible",
    "tokenize",
]
