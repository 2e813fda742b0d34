"""``offline:extractive`` — a deterministic, network-free *baseline* answerer (not a model).

Rules (stable; a change here is a change of the baseline's numbers):

1. Documents: ``metadata["documents"]`` (JSON list of the numbered documents' texts,
   ``[1]`` first); otherwise ``variables["context"]`` split at lines starting ``[n]``
   (the whole context is document 1 when it has no markers).
2. Every document is split into sentences (:func:`app.text.sentences`); each sentence is
   scored against the question's terms (:func:`app.text.query_terms`: the same terms the
   retriever searches with) by the retriever's BM25 (:class:`app.retrieval.bm25.BM25`'s
   raw score, computed by :func:`bm25_raw`: the same floats, tested; k1 = 1.2, b = 0.75,
   idf = ln(1 + (N − df + 0.5)/(df + 0.5)) over the sentences, each sentence analysed as a
   document: ``tokenize(s, query=False)``).
   Whether a sentence *contains* a term (rules 3 and 7) is :class:`app.text.Matcher`'s
   test: CJK terms as substrings, other terms as whole tokens.
3. A sentence is *eligible* when it, together with its document's title and section
   (read from ``<document … title="…" section="…">`` in ``variables["context"]`` when the
   pipeline sends them), contains at least :data:`MIN_COVERAGE` (50 %) of the question's
   distinct content terms (unweighted: idf over a handful of sentences is too noisy to
   decide a refusal). A question with no content term left uses its single characters.
4. No eligible sentence (typically an English question over a Chinese page, or a colloquial
   one: no term is shared) → the sentence of document ``[1]`` (the retriever's best) with the
   highest *dense* relevance (:func:`app.retrieval.hybrid.sentence_relevance`: the local
   multilingual-e5-small, ``cos − background`` as in dense retrieval) is the only eligible
   one and the anchor — if that relevance is above :data:`DENSE_MIN` = 0, i.e. the sentence
   is nearer to this question than to the content-free background questions. 0 is the
   feature's own zero, not a fitted value: on ``full`` the answerable cases that reach this
   rule score 0.02–0.14 and the two expected-refusal ones 0.088 and 0.106, so no threshold
   separates them; refusing those is the retriever's floor's job (it let document [1]
   through). Below it, without the model installed, or with no documents → the refusal: ``metadata["rejection_answer"]`` (the prompt's ``REJECTION_ANSWER``), else a
   default refusal in the question's language.
5. Otherwise one sentence is picked as the *anchor*: among the eligible sentences, the
   highest ``(bm25 / max bm25 + coverage) × quantity × rank`` where

   * ``bm25`` also counts the question terms found in the sentence's title/section
     (:data:`HEADER_WEIGHT` × idf each: a section called 四个数据等级 is about 数据等级);
   * ``coverage`` is rule 3's share of the question's terms;
   * ``quantity`` is 1 + :data:`QUANTITY_BOOST` when the question asks for a number,
     amount, duration or date (:func:`asks_quantity`: 多少 / 几 / 多久 / 多长 / 上限 /
     how many / how long / what is the limit …) and the sentence holds one
     (:func:`has_quantity`: a digit, or a Chinese numeral with a unit), else 1 — so
     "年假有多少天？" takes the sentence with the days, not the summary sentence;
   * ``rank`` is ``1 / (1 + RANK_PRIOR × (n − 1))`` for document ``[n]``: the documents
     arrive ordered by retrieval, ``[1]`` best, so a lower-ranked document must match
     clearly better to win.

   Ties: document order, then sentence order.
6. The anchor is widened into a contiguous *window* of its own document: the neighbour
   before or after (the one with the higher score from rule 5's ``bm25``; ties → the one
   after) is added until :data:`MAX_SENTENCES` sentences or the document's edge. A KB
   chunk is one section, so the sentences around the best one usually carry the rest of
   the answer (the list after "须携带以下材料：", the limit after a definition).
7. Slots still free go to sentences from *other* documents that each add ≥
   :data:`MIN_GAIN` (15 %) of the question's terms not covered yet (ties: higher rule-5
   value, then document order) — a second aspect of the question answered elsewhere.
8. Output: the window in document order, then the other sentences; a citation ``[n]`` of
   the sentence's own document closes each run of sentences from one document.

The answer reads only the question, the numbered documents (with their titles/sections)
and the rejection answer — never a golden answer or a test's keywords.

The completion reports ``provider="offline"``, ``model="extractive"`` and its request id
starts with ``baseline-extractive-`` so no report can mistake it for a model.

The pipeline's rewrite and summary prompts (purpose ``rewrite`` / ``summary``) are not
answered by these rules but by the offline rewriter and summariser
(:mod:`app.baselines.tasks`), request ids ``baseline-rewriter-`` /
``baseline-summariser-``.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence

from app.baselines import tasks
from app.errors import ProviderError
from app.llm.providers.base import Provider
from app.llm.tokens import get_counter
from app.llm.types import ChatRequest, Completion, Usage
from app.text import Matcher, default_refusal, has_cjk, query_terms, sentences

K1 = 1.2
B = 0.75
MIN_COVERAGE = 0.5
MIN_GAIN = 0.15
MAX_SENTENCES = 3
RANK_PRIOR = 0.25  # rule 5; tuned on the full suite (0 / 0.1 / 0.25 / 0.5 / 1)
QUANTITY_BOOST = 0.5  # rule 5; 0.25-1.0 give the same full-suite numbers
HEADER_WEIGHT = 0.5  # rule 5
DENSE_MIN = 0.0  # rule 4
#: (question, sentences) -> one relevance per sentence, or None when no dense model is there
DenseScorer = Callable[[str, list[str]], "list[float] | None"]
_QUANTITY_QUESTION = re.compile(
    r"多少|几|多久|多长|多大|多高|多远|何时|什么时候|哪天|哪一天|截止|上限|下限|最多|最少|最高|最低|"
    r"最长|最短|额度|限额|标准|期限|"
    r"\bhow (?:many|much|long|often|old|far|soon|large|big)\b|\bwhen\b|"
    r"\bwhat (?:is|are) the (?:\w+ ){0,2}(?:limit|cap|maximum|minimum|price|cost|fee|deadline|"
    r"rate|number|amount|size|length|duration|standard|allowance)s?\b",
    re.IGNORECASE,
)
_QUANTITY = re.compile(
    r"\d|[一二两三四五六七八九十百千万半]+\s*(?:个|天|日|周|月|年|元|万|次|小时|分钟|倍|人|成|岁|工作日)"
)
_MARKER = re.compile(r"^\s*\[(\d+)\]\s*", re.MULTILINE)
_TAG = re.compile(r"[<‹]/?[^<>‹\s]{1,20}>")  # <用户提问>, </question>, ‹用户提问> ...


# The documents are knowledge-base chunks, so the same texts come back case after case:
# their sentences and each sentence's (read-only) Matcher are pure functions of the text,
# kept for the most recent few thousand texts.
@functools.lru_cache(maxsize=1024)
def _sentences_with_terms(document: str) -> tuple[tuple[int, str, Matcher], ...]:
    """(position in the document, sentence, its matcher) of each sentence holding a term."""
    out = []
    for pos, text in enumerate(sentences(document)):
        match = _matcher(text)
        if match.tokens:
            out.append((pos, text, match))
    return tuple(out)


@functools.lru_cache(maxsize=8192)
def _matcher(text: str) -> Matcher:
    return Matcher(text)


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


def question_terms(question: str) -> list[str]:
    """The question's terms: :func:`app.text.query_terms` (the retriever's query side), or
    its single characters when none is left."""
    return query_terms(question)


def question_of(request: ChatRequest) -> str:
    """The plain question: ``metadata["question"]`` (the pipeline sends it unescaped and
    untagged), else ``variables["question"]`` with any XML tags the prompt wraps it in
    removed, else the last user message."""
    plain = request.metadata.get("question")
    if plain:
        return plain
    question = request.variables.get("question")
    if question:
        return html.unescape(_TAG.sub(" ", question)).strip()
    users = [m.content for m in request.messages if m.role == "user"]
    return users[-1] if users else ""


def _cite(sentence: str, n: int) -> str:
    body = sentence.rstrip()
    end = ""
    while body and body[-1] in "。！？!?；;.":
        end = body[-1] + end
        body = body[:-1]
    sep = "" if has_cjk(body[-1:]) else " "
    return f"{body}{sep}[{n}]{end}"


def asks_quantity(question: str) -> bool:
    """Does the question ask for a number, amount, duration or date (多少/几/多久/how many…)?"""
    return _QUANTITY_QUESTION.search(question) is not None


def has_quantity(sentence: str) -> bool:
    """A digit, or a Chinese numeral with a unit (三个月, 两周, 半天)."""
    return _QUANTITY.search(sentence) is not None


def bm25_raw(
    counts: Sequence[Mapping[str, int]], lengths: Sequence[int], terms: Sequence[str]
) -> tuple[dict[str, float], list[float]]:
    """Rule 2's BM25 (k1 = :data:`K1`, b = :data:`B`) over the documents whose token counts
    and lengths are ``counts`` / ``lengths``: each of the distinct ``terms``' idf, and each
    document's raw score — the floats of :class:`app.retrieval.bm25.BM25` ``(…, k1=K1,
    b=B)``'s ``idf`` and ``raw_score`` (the same expressions, terms added in the same order;
    a term a document lacks adds 0.0 there, so it is skipped here; tested equal), without
    building that index's per-term postings for a handful of sentences per answer."""
    n = len(counts)
    avgdl = (sum(lengths) / n) if n else 0.0
    idf: dict[str, float] = {}
    for t in terms:
        df = sum(1 for c in counts if t in c)
        idf[t] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    raw: list[float] = []
    for c, length in zip(counts, lengths, strict=True):
        norm = 1.0 - B + B * (length / avgdl if avgdl else 1.0)
        raw.append(
            sum(
                idf[t] * (tf * (K1 + 1.0) / (tf + K1 * norm))  # query tf 1: distinct terms
                for t in terms
                if (tf := c.get(t, 0))
            )
            + 0.0  # a float, as BM25's sum of 0.0 terms is, when no term is there
        )
    return idf, raw


def answer(
    question: str,
    documents: list[str],
    rejection: str | None,
    headers: list[str] | None = None,
    dense: DenseScorer | None = None,
) -> tuple[str, bool]:
    """(answer text, refused) — refused when no sentence clears the threshold."""
    refusal = rejection or default_refusal(question)
    q_terms = sorted(set(question_terms(question)))
    heads = [_matcher(h) for h in (headers or [])]
    heads += [_matcher("")] * (len(documents) - len(heads))
    # the sentences holding a term, in document order: sentence i is text_of[i], at position
    # pos_of[i] of document doc_of[i] (1-based), matched by match_of[i]
    rows = [
        (d, p, s, m)
        for d, doc in enumerate(documents, start=1)
        for p, s, m in _sentences_with_terms(doc)
    ]
    if not q_terms or not rows:
        return refusal, True
    doc_of, pos_of, text_of, match_of = zip(*rows, strict=True)
    n, n_terms = len(rows), len(q_terms)
    idf, raw = bm25_raw([m.counts for m in match_of], [len(m.tokens) for m in match_of], q_terms)
    cjk = [(t, has_cjk(t)) for t in q_terms]
    # per document: the question terms its title/section holds, and their rule-5 bonus
    # (summed in q_terms order, as per sentence before)
    head_terms: dict[int, list[str]] = {}
    head_bonus: dict[int, float] = {}
    for d in dict.fromkeys(doc_of):
        terms = [t for t in q_terms if t in heads[d - 1]]
        head_terms[d] = terms
        head_bonus[d] = HEADER_WEIGHT * sum(idf[t] for t in terms)
    # rule 3's coverage of each sentence (with its header), computed once per sentence
    covered: list[set[str]] = []
    for m, d in zip(match_of, doc_of, strict=True):
        text, counts = m.text, m.counts
        covered.append(
            {t for t, is_cjk in cjk if (t in text if is_cjk else t in counts)} | set(head_terms[d])
        )
    scores = [raw[i] + head_bonus[doc_of[i]] for i in range(n)]
    eligible = [i for i in range(n) if len(covered[i]) / n_terms >= MIN_COVERAGE]
    if not eligible and dense is not None:  # rule 4: no sentence shares the question's terms
        first = [i for i in range(n) if doc_of[i] == 1]
        rel = dense(question, [text_of[i] for i in first]) if first else None
        if rel is not None:
            pick = max(range(len(first)), key=lambda i: (rel[i], -i))
            eligible = [first[pick]] if rel[pick] > DENSE_MIN else []
    if not eligible:
        return refusal, True
    top = max(scores) or 1.0
    quantity = asks_quantity(question)
    anchor_scores: dict[int, float] = {}

    def anchor_score(i: int) -> float:
        value = anchor_scores.get(i)
        if value is None:
            value = scores[i] / top + len(covered[i]) / n_terms
            if quantity and has_quantity(text_of[i]):
                value *= 1 + QUANTITY_BOOST
            value = anchor_scores[i] = value / (1 + RANK_PRIOR * (doc_of[i] - 1))
        return value

    anchor = max(eligible, key=lambda i: (anchor_score(i), -doc_of[i], -pos_of[i]))
    doc = doc_of[anchor]
    chosen = [anchor]
    have = set(covered[anchor])

    # the window: the anchor's neighbours in its document (the better-scoring side first)
    same = [i for i in range(n) if doc_of[i] == doc]
    k = same.index(anchor)
    lo, hi = k, k
    while len(chosen) < MAX_SENTENCES:
        options = [j for j in (hi + 1, lo - 1) if 0 <= j < len(same)]
        if not options:
            break
        j = max(options, key=lambda j: (scores[same[j]], j > hi))
        chosen.append(same[j])
        have |= covered[same[j]]
        lo, hi = min(lo, j), max(hi, j)

    # other documents: a sentence that covers enough of the question not covered yet
    while len(chosen) < MAX_SENTENCES:
        best: tuple[float, float, int] | None = None
        for i in range(n):
            if i in chosen or doc_of[i] == doc or scores[i] <= 0:
                continue
            gain = len(covered[i] - have) / n_terms
            value = anchor_score(i)
            if gain >= MIN_GAIN and (best is None or (gain, value) > (best[0], best[1])):
                best = (gain, value, i)
        if best is None:
            break
        chosen.append(best[2])
        have |= covered[best[2]]

    window = sorted(chosen[: hi - lo + 1], key=lambda i: pos_of[i])
    ordered = [(doc_of[i], text_of[i]) for i in window + chosen[hi - lo + 1 :]]
    return _render(ordered, question), False


def _render(chosen: list[tuple[int, str]], question: str) -> str:
    """The sentences ``(document, text)`` with a citation ``[n]`` after each run from one
    document."""
    joiner = "" if has_cjk(question) else " "
    parts: list[str] = []
    for k, (doc, text) in enumerate(chosen):
        last_of_run = k + 1 == len(chosen) or chosen[k + 1][0] != doc
        parts.append(_cite(text, doc) if last_of_run else text)
    return joiner.join(parts)


class ExtractiveProvider(Provider):
    """Deterministic extractive baseline; see the module docstring for its rules."""

    family = "offline"
    cacheable = False
    deterministic = True
    in_process = True

    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        task = tasks.task_name(request)
        if task is not None:  # the pipeline's rewrite / summary prompt: its own baseline
            text = tasks.load_task(task)(request)
            return offline_completion(request, text, model, algorithm=task)
        question = question_of(request)
        documents = documents_of(request)
        text, _refused = answer(
            question,
            documents,
            request.metadata.get("rejection_answer"),
            headers_of(request, len(documents)),
            dense=_dense_scorer(),
        )
        return offline_completion(request, text, model)


def _dense_scorer() -> DenseScorer | None:
    from app.retrieval.hybrid import sentence_relevance

    return sentence_relevance


def _payload_encoder() -> Callable[[object], str]:
    """``json.dumps(·, sort_keys=True, ensure_ascii=False)``'s text, by one C encoder made
    once (``json.dumps`` makes a JSONEncoder and a C encoder per call: half its time on a
    prompt-sized payload). No circular-reference bookkeeping: a payload is plain data built
    per call (its lists and dicts are new). Without the C encoder: ``json.dumps`` itself."""
    from json import encoder as stdlib

    c_make_encoder = getattr(stdlib, "c_make_encoder", None)  # not in typeshed's stub
    if c_make_encoder is None:  # pragma: no cover - CPython has it
        return functools.partial(json.dumps, sort_keys=True, ensure_ascii=False)
    default = stdlib.JSONEncoder().default
    encode = c_make_encoder(
        None, default, stdlib.encode_basestring, None, ": ", ", ", True, False, True
    )

    def dumps(payload: object) -> str:
        return "".join(encode(payload, 0))

    return dumps


_payload_dumps = _payload_encoder()


def payload_json(request: ChatRequest) -> str:
    """The request's content as one canonical JSON text (what its request id digests):
    ``json.dumps(request.cache_payload(), sort_keys=True, ensure_ascii=False)``."""
    return _payload_dumps(request.cache_payload())


def offline_completion(
    request: ChatRequest,
    text: str,
    model: str,
    *,
    algorithm: str | None = None,
    payload: str | None = None,
) -> Completion:
    """A Completion with real BPE token counts, zero cost and a ``baseline-<algorithm>-``
    request id (``algorithm`` defaults to the model: ``extractive``, ``reference-judge``);
    ``payload`` is :func:`payload_json` of the request when the caller has it already."""
    counter = get_counter()
    prompt = request.prompt_text or "\n".join(
        [request.system or "", *(m.content for m in request.messages)]
    )
    body = payload if payload is not None else payload_json(request)
    digest = hashlib.sha256(body.encode()).hexdigest()[:16]
    return Completion(
        text=text,
        provider="offline",
        model=model,
        finish_reason="stop",
        usage=Usage(input_tokens=counter.count(prompt), output_tokens=counter.count(text)),
        request_id=f"baseline-{algorithm or model}-{digest}",
        cost_usd=0.0,
    )
