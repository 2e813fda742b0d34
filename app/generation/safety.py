"""Prompt-injection detection and the XML isolation of untrusted text (seed 004 §6).

Detection runs the seed's four pattern families (§6.1) plus a few siblings on **two
normalised views** of the text, so the obvious evasions do not slip through:

1. ``NFKC`` (full-width ``ｉｇｎｏｒｅ`` → ``ignore``, ``＜system＞`` → ``<system>``),
   zero-width and soft-hyphen characters removed, ``casefold`` (``IgNoRe`` → ``ignore``),
   whitespace runs collapsed to one space;
2. the same, plus *spacing evasions undone*: single letters separated by spaces, dots,
   dashes or underscores are joined (``i g n o r e`` / ``i.g.n.o.r.e`` → ``ignore``) and
   any whitespace between two CJK characters is dropped (``忽 略 前 面`` → ``忽略前面``).

Chinese/English mixes (``请 ignore 前面的 instructions``) are covered because every pattern
takes either language on each side. A word-boundary guard keeps English words inside
longer words (``impact assessment`` ≠ ``act as``) from matching.

Policies (``PipelineConfig.injection_policy``): ``refuse`` — answer with a fixed refusal, no
retrieval, no LLM call, audit warning; ``clean`` — remove the matched spans and go on (refuse
if nothing is left); ``alert`` — audit warning, answer normally (seed: internal KBs).

Isolation: :func:`escape_xml` neutralises ``<``/``>``/``&`` in user and retrieved text so
they cannot close the ``<用户提问>`` / ``<参考资料>`` tags the prompt puts around them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Literal

InjectionPolicy = Literal["refuse", "clean", "alert"]

# name -> pattern (applied to the normalised views, case-folded)
INJECTION_PATTERNS: dict[str, str] = {
    # seed §6.1 #1 (+ 无视/disregard, 以上/上面/prior/earlier)
    "ignore_previous": r"(忽略|无视|不要理会|ignore|disregard)[\s\S]{0,20}"
    r"(前面|上面|之前|以上|先前|上述|above|previous|prior|earlier|preceding|all\b)",
    "forget_instructions": r"(忘记|忘掉|forget)[\s\S]{0,12}"
    r"(指令|指示|规则|设定|提示词|instructions?|rules|prompt)",
    # seed §6.1 #2
    "role_override": r"(你现在是|你现在扮演|从现在(开始|起)你是|你的新身份|扮演一个|new role|"
    r"you are now\b|pretend (to be|you are)|role-?play as|"
    r"\bact as (if\b|an? (\w+ ){0,2}(ai|assistant|bot|model|gpt|dan|hacker|admin|"
    r"administrator|system|developer|unrestricted|jailbroken)\b|my\b))",
    # seed §6.1 #3
    "system_tag": r"(\bsystem\s*:|<\s*/?\s*system\s*>|\[\s*system\s*\]|<<\s*sys\s*>>|\[/?inst\]|"
    r"系统\s*[:：]\s*(你|忽略|新))",
    # seed §6.1 #4 (+ reveal/repeat/泄露/告诉我, 系统提示/初始指令)
    "prompt_exfiltration": r"(输出|打印|显示|告诉我|泄露|重复|展示|print|display|show|reveal|repeat|"
    r"output|leak|dump)[\s\S]{0,20}(prompt|提示词|系统消息|系统提示|初始指令|原始指令|"
    r"system message|(your|initial|original|system|hidden) instructions)",
    "jailbreak": r"(developer mode|开发者模式|越狱|jailbreak|\bdan mode|do anything now)",
}
_COMPILED = {name: re.compile(p, re.IGNORECASE) for name, p in INJECTION_PATTERNS.items()}

_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_SPACES = re.compile(r"\s+")
_SPACED_LETTERS = re.compile(r"\b[a-z](?:[ ._\-*·]+[a-z]\b){2,}")
_CJK = "\u3400-\u4dbf\u4e00-\u9fff"
_CJK_GAP = re.compile(rf"(?<=[{_CJK}])[\s._\-*·]+(?=[{_CJK}])")


def normalize(text: str) -> str:
    """View 1: NFKC, invisible characters removed, case-folded, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text)
    text = _INVISIBLE.sub("", text).casefold()
    return _SPACES.sub(" ", text).strip()


def collapse_spacing(text: str) -> str:
    """View 2: :func:`normalize` plus spaced-out letters joined and CJK gaps removed."""
    text = normalize(text)
    text = _SPACED_LETTERS.sub(lambda m: re.sub(r"[ ._\-*·]+", "", m.group(0)), text)
    return _CJK_GAP.sub("", text)


@dataclass(frozen=True)
class InjectionFinding:
    detected: bool
    patterns: tuple[str, ...] = ()
    spans: tuple[str, ...] = field(default=(), repr=False)  # matched text (normalised)


def detect_injection(text: str) -> InjectionFinding:
    """Which injection patterns match ``text`` (in either normalised view)."""
    hits: list[str] = []
    spans: list[str] = []
    for view in dict.fromkeys((normalize(text), collapse_spacing(text))):
        for name, pattern in _COMPILED.items():
            match = pattern.search(view)
            if match:
                if name not in hits:
                    hits.append(name)
                spans.append(match.group(0))
    return InjectionFinding(bool(hits), tuple(hits), tuple(spans))


def clean_injection(text: str) -> str:
    """Remove every matched span from the normalised text (the ``clean`` policy)."""
    cleaned = collapse_spacing(text)
    for _ in range(5):  # a removal can expose another match; bounded
        changed = False
        for pattern in _COMPILED.values():
            # drop the match and the rest of its clause (up to the next punctuation mark)
            clause = re.compile(f"(?:{pattern.pattern})[^，,。.;；!！?？\\n]*", re.IGNORECASE)
            new = clause.sub(" ", cleaned)
            changed = changed or new != cleaned
            cleaned = new
        if not changed:
            break
    return _SPACES.sub(" ", cleaned).strip(" ，,。.;；:：")


def escape_xml(text: str) -> str:
    """Make untrusted text inert inside XML-tagged prompt sections."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
