"""``offline:extractive`` — a deterministic, network-free *baseline* answerer (not a model).

Rules (stable; a change here is a change of the baseline's numbers):

1. Documents: ``metadata["documents"]`` (JSON list of the numbered documents' texts,
   ``[1]`` first); otherwise ``variables["context"]`` split at lines starting ``[n]``
   (the whole context is document 1 when it has no markers).
2. Every document is split into sentences; each sentence is scored against the content
   terms of ``variables["question"]`` (falling back to the last user message) with
   BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N − df + 0.5)/(df + 0.5)) over the sentences;
   terms and matching as in :mod:`app.llm.providers._text`: jieba for Chinese, CJK terms
   matched as substrings, lowercase words for English).
3. A sentence is *eligible* when it, together with its document's title and section
   (read from ``<document … title="…" section="…">`` in ``variables["context"]`` when the
   pipeline sends them), contains at least :data:`MIN_COVERAGE` (50 %) of the question's
   distinct content terms (unweighted: idf over a handful of sentences is too noisy to
   decide a refusal). A question with no content term left uses its single characters.
4. No eligible sentence → the refusal: ``metadata["rejection_answer"]`` (the prompt's
   ``REJECTION_ANSWER``), else a default refusal in the question's language.
5. Otherwise the best BM25 sentence is taken, then greedily up to
   :data:`MAX_SENTENCES` − 1 more eligible or not, that each add ≥ :data:`MIN_GAIN` (15 %)
   of the question's terms not covered yet (ties: higher BM25, then document order); each is cited with its document number ``[n]``, in selection order.

The completion reports ``provider="offline"``, ``model="extractive"`` and its request id
starts with ``baseline-extractive-`` so no report can mistake it for a model.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass

from app.errors import ProviderError
from app.llm.providers import _text
from app.llm.providers.base import Provider
from app.llm.types import ChatRequest, Completion, Usage

K1 = 1.2
B = 0.75
MIN_COVERAGE = 0.5
MIN_GAIN = 0.15
MAX_SENTENCES = 3
_MARKER = re.compile(r"^\s*\[(\d+)\]\s*", re.MULTILINE)


@dataclass(frozen=True)
class _Sentence:
    doc: int  # 1-based document number
    pos: int  # position in the document
    text: str
    match: _text.Matcher
    header: _text.Matcher


def documents_of(request: ChatRequest) -> list[str]:
    raw = request.metadata.get("documents")
    if raw:
        try:
            docs = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ProviderError(
                f"offline:extractive: metadata['documents'] is not a JSON list: {exc}",
                provider="offline:extractive",
            ) from exc
        if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
            raise ProviderError(
                "offline:extractive: metadata['documents'] must be a JSON list of strings",
                provider="offline:extractive",
            )
        return docs
    context = request.variables.get("context", "")
    parts = _MARKER.split(context)
    if len(parts) < 3:
        return [context] if context.strip() else []
    numbered: dict[int, str] = {}
    for i in range(1, len(parts) - 1, 2):
        numbered[int(parts[i])] = parts[i + 1].strip()
    return [numbered.get(n, "") for n in range(1, max(numbered) + 1)]


_HEADER = re.compile(r"<document\b[^>]*>")
_ATTR = re.compile(r'\b(?:title|section)="([^"]*)"')


def headers_of(request: ChatRequest, count: int) -> list[str]:
    """Title + section of each numbered document, from the context's XML tags."""
    tags = _HEADER.findall(request.variables.get("context", ""))
    heads = [" ".join(_ATTR.findall(tag)) for tag in tags]
    return (heads + [""] * count)[:count]


def question_of(request: ChatRequest) -> str:
    question = request.variables.get("question")
    if question:
        return question
    users = [m.content for m in request.messages if m.role == "user"]
    return users[-1] if users else ""


def _cite(sentence: str, n: int) -> str:
    body = sentence.rstrip()
    end = ""
    while body and body[-1] in "。！？!?；;.":
        end = body[-1] + end
        body = body[:-1]
    sep = "" if _text.has_cjk(body[-1:]) else " "
    return f"{body}{sep}[{n}]{end}"


def answer(
    question: str,
    documents: list[str],
    rejection: str | None,
    headers: list[str] | None = None,
) -> tuple[str, bool]:
    """(answer text, refused) — refused when no sentence clears the threshold."""
    refusal = rejection or _text.default_refusal(question)
    q_terms = sorted(set(_text.tokens(question) or _text.fallback_terms(question)))
    heads = [_text.Matcher(h) for h in (headers or [])]
    heads += [_text.Matcher("")] * (len(documents) - len(heads))
    sents = [
        _Sentence(d, p, s, _text.Matcher(s), heads[d - 1])
        for d, doc in enumerate(documents, start=1)
        for p, s in enumerate(_text.sentences(doc))
    ]
    sents = [s for s in sents if s.match.tokens]
    if not q_terms or not sents:
        return refusal, True
    n = len(sents)
    avgdl = sum(len(s.match.tokens) for s in sents) / n
    df = Counter(t for s in sents for t in q_terms if t in s.match)
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in q_terms}

    def bm25(s: _Sentence) -> float:
        norm = K1 * (1 - B + B * len(s.match.tokens) / avgdl)
        score = 0.0
        for t in q_terms:
            tf = s.match.count(t)
            if tf:
                score += idf[t] * tf * (K1 + 1) / (tf + norm)
        return score

    def covered(s: _Sentence) -> set[str]:
        return {t for t in q_terms if t in s.match or t in s.header}

    def weight(terms: set[str]) -> float:
        return len(terms) / len(q_terms)

    ranked = sorted(((bm25(s), s) for s in sents), key=lambda x: (-x[0], x[1].doc, x[1].pos))
    eligible = [(score, s) for score, s in ranked if weight(covered(s)) >= MIN_COVERAGE]
    if not eligible:
        return refusal, True
    chosen = [eligible[0][1]]
    have = covered(chosen[0])
    while len(chosen) < MAX_SENTENCES:
        best: tuple[float, float, _Sentence] | None = None
        for score, s in ranked:
            if s in chosen or score <= 0:
                continue
            gain = weight(covered(s) - have)
            if gain >= MIN_GAIN and (best is None or (gain, score) > (best[0], best[1])):
                best = (gain, score, s)
        if best is None:
            break
        chosen.append(best[2])
        have |= covered(best[2])
    joiner = "" if _text.has_cjk(question) else " "
    return joiner.join(_cite(s.text, s.doc) for s in chosen), False


class ExtractiveProvider(Provider):
    """Deterministic extractive baseline; see the module docstring for its rules."""

    family = "offline"
    cacheable = False

    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        question = question_of(request)
        documents = documents_of(request)
        text, _refused = answer(
            question,
            documents,
            request.metadata.get("rejection_answer"),
            headers_of(request, len(documents)),
        )
        return offline_completion(request, text, model)


def offline_completion(request: ChatRequest, text: str, model: str) -> Completion:
    """A Completion with real BPE token counts, zero cost and a ``baseline-`` request id."""
    from app.llm.tokens import get_counter

    counter = get_counter()
    prompt = request.prompt_text or "\n".join(
        [request.system or "", *(m.content for m in request.messages)]
    )
    digest = hashlib.sha256(
        json.dumps(request.cache_payload(), sort_keys=True, ensure_ascii=False).encode()
    ).hexdigest()[:16]
    return Completion(
        text=text,
        provider="offline",
        model=model,
        finish_reason="stop",
        usage=Usage(input_tokens=counter.count(prompt), output_tokens=counter.count(text)),
        request_id=f"baseline-{model}-{digest}",
        cost_usd=0.0,
    )
