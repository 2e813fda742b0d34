"""Multi-turn query rewriting (seed 003 §3–4; seed 000's disambiguation as an alternative).

Flow of :meth:`Rewriter.rewrite`:

1. **Trigger check** — no history, or no pronoun/demonstrative (他/她/它/这个/那个/该/这/那/其 …,
   he/she/it/they/this/that …) and no ellipsis (``那…呢``, a bare ``X呢？``, "what/how about
   …"), → the question is used as is and **no model is called** (seed: ~40 % of follow-ups).
2. **Cache** — keyed on (strategy, last two turns, question) (seed 003 §3.4), in process, LRU.
3. **History window** — the last 6 turns, user text ≤ 200 chars, answer ≤ 100 chars, newest
   first, plus an explicit candidate-entity line (``对话中提到的关键实体：…``, seed §4.2).
4. **Rewrite** — strategy ``standalone``: the ``rewrite/standalone`` prompt (variables
   ``history``, ``question``), JSON ``{"original", "rewritten"}``; an unparseable answer falls
   back to the original question. Strategy ``disambiguate``: seed 000's
   ``rewrite/disambiguate_zh|en`` (``chat_history``, ``input``), first line of the answer.
   The model is always called through the engine; with the **offline** model
   (``offline:extractive``) the provider answers the rewrite prompt with
   :func:`offline_rewrite`, a deterministic baseline (entity substitution from the
   candidate list, ellipsis completion from the last user turn; see
   :mod:`app.baselines.replies`), so the offline run takes the same path.
5. **Cleanup** — 刚才/刚刚/之前/提到的 … are removed from the rewrite (seed §4.3) when the
   user did not write them in the question themselves.
6. **Over-rewrite guard** (seed §4.1) — :func:`changed_ratio`: the share of the original's
   *content characters* (the question minus trigger words, ellipsis particles and
   punctuation) that :class:`difflib.SequenceMatcher` cannot find, in order, in the rewrite.
   Insertions (adding 张三/第一季度) cost nothing; replacing or dropping the user's own words
   does. More than 0.5 → revert to the original.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from difflib import SequenceMatcher
from typing import Literal

from app.errors import ConfigError
from app.generation.pipeline.memory import Language, format_messages
from app.llm.types import Message
from app.text import ensure_posseg, fold, has_cjk, nfkc, tokenize

Strategy = Literal["standalone", "disambiguate", "off"]
# (prompt id, variables) -> (model text, qualified prompt version)
RewriteLLM = Callable[[str, Mapping[str, str]], Awaitable[tuple[str, str]]]

MAX_TURNS = 6
MAX_USER_CHARS = 200
MAX_ANSWER_CHARS = 100
OVER_REWRITE_RATIO = 0.5

ZH_PRONOUNS = (
    "他们", "她们", "它们", "这个", "那个", "这款", "那款", "这家", "那家", "这项", "那项",
    "这种", "那种", "这些", "那些", "这位", "那位", "上述", "前者", "后者", "他", "她", "它",
    "该", "这", "那", "其", "此",
)  # fmt: skip
# 其他/其中/尤其/此外/因此/那么 … are ordinary words, not references
_ZH_NOT_REFERENCE = re.compile(
    r"其他|其它|其中|其实|其余|尤其|极其|及其|此外|因此|从此|如此|那么|这里|那里"
)
_ZH_PRONOUN = re.compile("|".join(ZH_PRONOUNS))
_ZH_ELLIPSIS = re.compile(
    r"^(那|那么)?\s*(?P<x>[^，,。？?！!]{1,16}?)\s*(呢|怎么样|如何)\s*[？?]?$"
)
_EN_PRONOUN = re.compile(
    r"\b(he|she|it|its|they|them|their|this|that|these|those|him|her|the former|the latter)\b",
    re.IGNORECASE,
)
_EN_ELLIPSIS = re.compile(r"^\s*(and|what about|how about)\b(?P<x>.*?)[?？]?\s*$", re.IGNORECASE)
CLEANUP_WORDS = (
    "之前讨论过的", "之前讨论的", "刚才讨论的", "刚才提到的", "刚刚提到的", "之前提到的",
    "前面提到的", "上面提到的", "刚才说的", "刚刚说的", "之前说的", "提到的", "刚才", "刚刚",
    "之前", "mentioned earlier", "we discussed", "previously mentioned",
)  # fmt: skip
_PUNCT = re.compile(r"[\s\W_]+")
_ENTITY_SUFFIX = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9\-]*\s?(?:方案|项目|系列|公司|产品|版本|计划|系统|团队|部门)"
)
_TIME = re.compile(r"第[一二三四1-4]季度|[0-9]{4}年|[上下本今去明]年|Q[1-4]")
_EN_ENTITY = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:\s+[A-Z0-9][A-Za-z0-9]*)*\b")
_EN_SKIP = frozenset(
    [
        "I",
        "The",
        "A",
        "An",
        "What",
        "How",
        "When",
        "Where",
        "Why",
        "Who",
        "Which",
        "Is",
        "Are",
        "Do",
        "Does",
        "Can",
        "Could",
        "Should",
        "Would",
        "It",
        "This",
        "That",
        "They",
        "We",
        "You",
        "He",
        "She",
        "And",
        "But",
        "Or",
        "So",
        "If",
        "Yes",
        "No",
        "Please",
        "Thanks",
    ]
)


def find_trigger(question: str) -> str | None:
    """The pronoun/demonstrative/ellipsis that makes ``question`` depend on the history."""
    q = nfkc(question).strip()
    if has_cjk(q):
        masked = _ZH_NOT_REFERENCE.sub("□", q)
        if match := _ZH_PRONOUN.search(masked):
            return match.group(0)
        if _ZH_ELLIPSIS.match(q):
            return "ellipsis"
        return None
    if match := _EN_PRONOUN.search(q):
        return match.group(0).lower()
    if _EN_ELLIPSIS.match(q):
        return "ellipsis"
    return None


def turns(history: Sequence[Message]) -> list[tuple[str, str]]:
    """History as (user, assistant) turns, oldest first (an unanswered user turn keeps '')."""
    out: list[tuple[str, str]] = []
    for m in history:
        if m.role == "user":
            out.append((m.content, ""))
        elif out and not out[-1][1]:
            out[-1] = (out[-1][0], m.content)
        else:
            out.append(("", m.content))
    return out


def extract_entities(history: Sequence[Message]) -> list[str]:
    """Candidate referents, newest turn first: names (people, organisations, places,
    brands) before products/plans (``B方案``, ``P60系列``) before times (``第一季度``) before
    the plain nouns of the user turns (``年假``)."""
    names: list[str] = []
    things: list[str] = []
    times: list[str] = []
    topics: list[str] = []  # plain nouns of the user turns: the last resort
    for user, answer in reversed(turns(history)[-MAX_TURNS:]):
        if has_cjk(user) and (subject := _ZH_SUBJECT.match(user.strip())):
            topics.append(subject.group(1))
        for text in (user, answer):
            if not text:
                continue
            things.extend(m.group(0).replace(" ", "") for m in _ENTITY_SUFFIX.finditer(text))
            times.extend(m.group(0) for m in _TIME.finditer(text))
            if has_cjk(text):
                names.extend(_zh_names(text))
            else:
                names.extend(_en_names(text))
    if names or things:
        topics = []  # plain nouns only when the history names nothing more specific
    return list(dict.fromkeys(n for n in [*names, *things, *times, *topics] if n))


def _en_names(text: str) -> list[str]:
    """Capitalised word runs, minus a lone capitalised word that only starts a sentence."""
    out = []
    for m in _EN_ENTITY.finditer(text):
        name = m.group(0)
        starts_sentence = m.start() == 0 or text[: m.start()].rstrip().endswith((".", "!", "?"))
        if name in _EN_SKIP or (starts_sentence and " " not in name):
            continue
        out.append(name)
    return out


_NAME_FLAGS = frozenset({"nr", "nrt", "ns", "nt", "nz"})
_GENERIC_TAIL = re.compile(r"(?<=..)(制度|政策|规定|办法|标准|流程|规范|细则)$")
_ZH_PREDICATE = re.compile(r"是|有|吗|怎|如何|哪|什么|多少")
# the subject of a user turn: the words before its first verb/particle (年假制度是怎样的 → 年假制度)
_ZH_SUBJECT = re.compile(
    r"^(?:请问|我想知道|想问一下|帮我查一下)?([^，,。？?！!\s]{2,12}?)"
    r"(?:是|有|怎么|如何|可以|能否|能|吗|呢|的|要|需要|[，,。？?！!])"
)


def _zh_names(text: str, flags: frozenset[str] = _NAME_FLAGS) -> list[str]:
    posseg = ensure_posseg()  # its tag table from a compact file, not a 50 MB dict
    return [w.word for w in posseg.cut(text) if w.flag in flags and len(w.word) >= 2]


def build_history_text(history: Sequence[Message], max_turns: int = MAX_TURNS) -> str:
    """The rewrite prompt's ``history``: newest first, clipped, plus the entity line."""
    recent = turns(history)[-max_turns:]
    zh = any(has_cjk(u + a) for u, a in recent)
    lines = []
    for i, (user, answer) in enumerate(reversed(recent), 1):
        label = f"[倒数第{i}轮]" if zh else f"[turn -{i}]"
        lines.append(f"{label} {'用户' if zh else 'User'}: {_clip(user, MAX_USER_CHARS)}")
        if answer:
            lines.append(f"{'助手' if zh else 'Assistant'}: {_clip(answer, MAX_ANSWER_CHARS)}")
    entities = extract_entities(history)
    if entities:
        sep = "、" if zh else ", "
        head = "对话中提到的关键实体：" if zh else "Entities mentioned in the conversation: "
        lines.append(head + sep.join(entities[:10]))
    return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "……"


def _core(question: str) -> str:
    q = fold(question)
    q = _ZH_PRONOUN.sub("", _ZH_NOT_REFERENCE.sub(lambda m: m.group(0).upper(), q))
    q = _EN_PRONOUN.sub("", q)
    q = re.sub(r"^(那么|那|and|what about|how about)|(呢|吗)(?=\W*$)", "", q.strip())
    return _PUNCT.sub("", q)


def changed_ratio(original: str, rewritten: str) -> float:
    """Share (0–1) of the original's content characters missing, in order, from the rewrite."""
    core = _core(original)
    if not core:
        return 0.0
    target = _PUNCT.sub("", fold(rewritten))
    matcher = SequenceMatcher(None, core, target, autojunk=False)
    kept = sum(block.size for block in matcher.get_matching_blocks())
    return round(1.0 - kept / len(core), 4)


def cleanup(rewritten: str, original: str) -> str:
    """Remove 刚才/之前/提到的 … unless the user wrote them in the question."""
    out = rewritten
    for word in CLEANUP_WORDS:
        if word not in original:
            out = out.replace(word, "")
    return re.sub(r"\s{2,}", " ", out).strip()


def parse_rewrite_json(text: str) -> str | None:
    """``rewritten`` from the model's JSON (code fences tolerated); None when unusable."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        return None
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    value = data.get("rewritten") if isinstance(data, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


# -- the offline baseline ------------------------------------------------------------------
_DETERMINER = re.compile(r"这个|那个|这款|那款|这家|那家|这项|那项|这种|那种|这位|那位|该|此|这|那")
_PERSONAL = re.compile(r"他们|她们|它们|他|她|它|其")
_EN_PERSONAL = re.compile(r"\b(it|they|them|he|she|him|her)\b", re.IGNORECASE)


def offline_rewrite(question: str, history: Sequence[Message]) -> str:
    """Deterministic rewrite without a model (a documented baseline, not an LLM):

    * a demonstrative + noun (这个方案) becomes the candidate entity with that noun
      (A方案 / B方案), choosing the one whose history clause shares most words with the
      question, then the most recent;
    * any other demonstrative becomes "<main name>的", a personal pronoun the main name
      (the newest person/organisation name in the history);
    * an ellipsis (``净利润呢？``) is completed with the last user turn's modifier up to its
      first 的 (``张三今年第一季度的``) or, lacking one, its names;
    * English: a personal pronoun (it/they/he/she …) becomes the newest capitalised entity;
      an ellipsis ("what about …") gets the newest entity appended.
    """
    trigger = find_trigger(question)
    if trigger is None or not history:
        return question
    entities = extract_entities(history)
    names = [e for e in entities if not _ENTITY_SUFFIX.fullmatch(e) and not _TIME.fullmatch(e)]
    main = names[0] if names else (entities[0] if entities else "")
    if not has_cjk(question):
        if trigger == "ellipsis" or not main:
            return question if not entities else f"{question.rstrip('?？ ')} ({entities[0]})?"
        # only personal pronouns: "this/that" are too often determiners or relatives
        return _EN_PERSONAL.sub(main, question, count=1)
    if trigger == "ellipsis" or (trigger == "那" and _ZH_ELLIPSIS.match(question)):
        return _complete_ellipsis(question, history, names)
    masked = _ZH_NOT_REFERENCE.sub(lambda m: "□" * len(m.group(0)), question)
    det = _DETERMINER.search(masked)
    if det:
        rest = question[det.end() :]
        options = [
            (e, k) for e in entities for k in range(len(e), 1, -1) if rest.startswith(e[-k:])
        ]
        if options:
            entity, k = _best_option(question, history, options)
            return question[: det.start()] + entity + rest[k:]
        if main:
            return question[: det.start()] + main + "的" + rest.lstrip("的")
    pron = _PERSONAL.search(masked)
    if pron and main:
        return question[: pron.start()] + main + question[pron.end() :]
    return question


def _best_option(
    question: str, history: Sequence[Message], options: list[tuple[str, int]]
) -> tuple[str, int]:
    text = "\n".join(m.content for m in history)
    clauses = [c for c in re.split(r"[，,。；;！!？?\n]", text) if c.strip()]
    words = set(tokenize(question))

    def rank(option: tuple[str, int]) -> tuple[int, int]:
        entity = option[0]
        overlap = max(
            (len(words & set(tokenize(c))) for c in clauses if entity in c),
            default=0,
        )
        return overlap, text.rfind(entity)

    return max(options, key=rank)


def _complete_ellipsis(question: str, history: Sequence[Message], names: list[str]) -> str:
    match = _ZH_ELLIPSIS.match(question.strip())
    x = match.group("x") if match else question.strip("？? ")
    last_user = next((m.content for m in reversed(history) if m.role == "user"), "")
    de = last_user.find("的")
    subject = _ZH_SUBJECT.match(last_user.strip())
    if 0 < de <= 30 and not _ZH_PREDICATE.search(last_user[:de]):
        prefix = last_user[: de + 1]
    elif subject:
        # the topic, not its container: 年假制度 → 年假, 差旅费报销标准 → 差旅费报销
        topic = _GENERIC_TAIL.sub("", subject.group(1)) or subject.group(1)
        prefix = topic + "的"
    elif names:
        prefix = names[0] + "的"
    else:
        return question
    if x.startswith(prefix.rstrip("的")):
        return question
    return f"{prefix}{x}是什么？"


# -- the rewriter --------------------------------------------------------------------------
@dataclass(frozen=True)
class RewriteResult:
    original: str
    rewritten: str  # what retrieval uses (== original when skipped or reverted)
    strategy: str
    triggered: bool
    trigger: str | None = None
    called_llm: bool = False
    cached: bool = False
    reverted: bool = False
    changed_ratio: float | None = None
    reason: str = ""
    prompt_version: str | None = None
    candidates: tuple[str, ...] = field(default=())

    @property
    def changed(self) -> bool:
        return self.rewritten != self.original


class Rewriter:
    """Rewrites a follow-up question into a standalone one (see the module docstring)."""

    def __init__(
        self,
        strategy: Strategy = "standalone",
        llm: RewriteLLM | None = None,
        *,
        standalone_prompt: str = "rewrite/standalone",
        disambiguate_prompt: str | None = None,
        cache_size: int = 256,
    ) -> None:
        self.strategy = strategy
        self.llm = llm
        self.standalone_prompt = standalone_prompt
        self.disambiguate_prompt = disambiguate_prompt
        self._cache: OrderedDict[str, RewriteResult] = OrderedDict()
        self._cache_size = cache_size

    def _key(self, question: str, history: Sequence[Message]) -> str:
        last_two = [[u, a] for u, a in turns(history)[-2:]]
        blob = json.dumps([self.strategy, last_two, question], ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def prompt_for(self, lang: Language) -> str | None:
        """The prompt a model rewrite of a ``lang`` question renders (``None``: strategy off)."""
        if self.strategy == "off":
            return None
        if self.strategy == "disambiguate":
            return self.disambiguate_prompt or f"rewrite/disambiguate_{lang}"
        return self.standalone_prompt

    async def rewrite(
        self,
        question: str,
        history: Sequence[Message],
        *,
        llm: RewriteLLM | Literal["default"] | None = "default",
        lang: Language | None = None,
    ) -> RewriteResult:
        """Rewrite ``question``; ``llm`` overrides the constructor's. A question that needs
        a rewrite and has no model raises :class:`ConfigError` (there is no silent bypass:
        the offline baseline is a provider too). ``lang`` picks the disambiguation prompt
        (default: from ``question``)."""
        model_llm = self.llm if llm == "default" else llm
        if self.strategy == "off":
            return RewriteResult(question, question, "off", False, reason="rewrite disabled")
        if not history:
            return RewriteResult(question, question, self.strategy, False, reason="no history")
        trigger = find_trigger(question)
        if trigger is None:
            return RewriteResult(
                question, question, self.strategy, False, reason="no pronoun/ellipsis trigger"
            )
        if model_llm is None:
            raise ConfigError(
                "Rewriter: no rewrite model; pass llm=… (the pipeline passes its engine-backed "
                "model, offline:extractive for the offline baseline)"
            )
        key = self._key(question, history)
        if key in self._cache:
            self._cache.move_to_end(key)
            return replace(self._cache[key], cached=True)
        result = await self._run(question, history, trigger, model_llm, lang)
        self._cache[key] = result
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return result

    async def _run(
        self,
        question: str,
        history: Sequence[Message],
        trigger: str,
        llm: RewriteLLM,
        lang: Language | None = None,
    ) -> RewriteResult:
        candidates = tuple(extract_entities(history))
        version: str | None = None
        reason = "rewritten"
        raw: str | None
        if self.strategy == "disambiguate":
            lang = lang or ("zh" if has_cjk(question) else "en")
            prompt = self.prompt_for(lang) or self.standalone_prompt
            recent = [m for u, a in turns(history)[-MAX_TURNS:] for m in _as_messages(u, a)]
            text, version = await llm(
                prompt, {"chat_history": format_messages(recent, lang), "input": question}
            )
            raw = next((ln.strip() for ln in text.strip().splitlines() if ln.strip()), None)
            strategy, called = "disambiguate", True
        else:
            text, version = await llm(
                self.standalone_prompt,
                {"history": build_history_text(history), "question": question},
            )
            raw = parse_rewrite_json(text)
            strategy, called = "standalone", True
            if raw is None:
                reason = "unparseable rewrite JSON; kept the original"
        rewritten = cleanup(raw, question) if raw else question
        ratio = changed_ratio(question, rewritten)
        reverted = ratio > OVER_REWRITE_RATIO
        if reverted:
            reason = f"over-rewrite: {ratio:.0%} of the question changed (> 50%); reverted"
            rewritten = question
        elif rewritten == question and raw is not None:
            reason = "model kept the question"
        return RewriteResult(
            original=question,
            rewritten=rewritten,
            strategy=strategy,
            triggered=True,
            trigger=trigger,
            called_llm=called,
            reverted=reverted,
            changed_ratio=ratio,
            reason=reason,
            prompt_version=version,
            candidates=candidates,
        )


def _as_messages(user: str, answer: str) -> list[Message]:
    out = [Message("user", user)] if user else []
    if answer:
        out.append(Message("assistant", answer))
    return out
