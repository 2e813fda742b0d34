"""The scan's prefilter (issue 14): a signal runs only on a view holding one of the strings
every match of its regex contains. The result must be the plain scan's — every signal's regex
searched in every view — on the labelled set, the shipped questions and the sample KB."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from app.generation.pipeline.injection import (
    Finding,
    SignalSet,
    load_signals,
    required_literals,
    scan,
    views,
)
from app.paths import kb_dir
from app.retrieval.kb import load_kb

ROOT = Path(__file__).resolve().parents[3]
SETS = ROOT / "tests" / "data" / "injection"
DATASETS = ROOT / "tests" / "eval" / "datasets"


def plain_scan(text: str, ss: SignalSet) -> Finding:
    """The scan without the prefilter: the definition in the module docstring, written out."""
    vs = list(dict.fromkeys(views(text).values()))
    hit = {}
    for sig in ss.signals:
        for view in vs:
            m = sig.regex.search(view)
            if m:
                hit[f"{sig.family}/{sig.name}"] = (sig, m.group(0))
                break
    per_family: dict[str, float] = {}
    for sig, _ in hit.values():
        per_family[sig.family] = per_family.get(sig.family, 0.0) + sig.weight
    score = sum(max(0.0, min(ss.family_cap, w)) for w in per_family.values())
    positive = [k for k, (s, _) in hit.items() if s.weight > 0]
    return Finding(
        detected=score >= ss.threshold - 1e-9,
        score=round(score, 3),
        families=tuple(f for f, w in per_family.items() if w > 0),
        signals=tuple(positive),
        spans=tuple(hit[k][1] for k in positive),
    )


def _texts() -> list[str]:
    texts = []
    for split in ("dev", "heldout"):
        for line in (SETS / f"{split}.jsonl").read_text("utf-8").splitlines():
            texts.append(json.loads(line)["text"])
    for path in sorted(DATASETS.glob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                texts.append(row["question"])
                texts += [t["content"] for t in row.get("history", [])]
    texts += [c.text for c in load_kb(kb_dir()).chunks]
    return texts


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"\bignore\s+(?:all|any)\b", {"ignore"}),  # the longest shortest string wins
        (r"(?:ab|cd)e?", {"ab", "cd"}),
        (r"(?<!my )\bsystem\b prompt", {"system prompt"}),  # zero width: the run goes on
        (r"(?:you|u) (?:are|r) now", {" now"}),
        (r"[<‹]/?system>", {"system>"}),
        (r"(?:xy|zx)+q", {"xy", "zx"}),  # a repeat of at least once needs its content
        (r"[ab]", {"a", "b"}),
        (r"a*b?", None),  # nothing is needed
        (r"\d+", None),
        (r"(?:abc|)", None),  # an empty branch needs nothing
        (r"(?i)abc", None),  # case-insensitive: no plain string is needed
        (r"x(?i:abc)", {"x"}),
    ],
)
def test_required_literals_by_hand(pattern: str, expected: set[str] | None) -> None:
    got = required_literals(pattern)
    assert (None if got is None else set(got)) == expected
    if got is not None:  # and it is a real necessary condition on random texts
        rng = random.Random(pattern)
        alphabet = "abcdeqxyz <>/system promptnow you are 1"
        for _ in range(2000):
            text = "".join(rng.choices(alphabet, k=rng.randint(0, 30)))
            if re.search(pattern, text):
                assert any(x in text for x in got), (pattern, text)


def test_every_shipped_signal_gets_a_prefilter() -> None:
    """Not needed for correctness; it is what makes the scan cheap on a benign text."""
    ss = load_signals()
    assert [s.name for s in ss.signals if s.needs is None] == []


def test_the_prefiltered_scan_is_the_plain_scan() -> None:
    ss = load_signals()
    texts = _texts()
    assert len(texts) > 700
    flagged = 0
    for text in texts:
        fast = scan(text, ss)
        assert fast == plain_scan(text, ss), text
        flagged += fast.detected
        for view in dict.fromkeys(views(text).values()):  # every match holds a needed string
            for sig in ss.signals:
                if sig.needs is not None and sig.regex.search(view):
                    assert any(x in view for x in sig.needs), (sig.name, view)
    assert flagged > 100  # the attacks are in there: the comparison covers matches too


def test_needed_strings_are_found_where_they_overlap() -> None:
    """A needed string inside another occurrence still counts: "behave" holds "have" and
    "jailbreak" holds "break" (a plain left-to-right search would see only the longer one),
    and the shorter needs a longer one starts with ("instruction" in "instructions")."""
    ss = load_signals()
    for outer, inner in (("behave", "have"), ("jailbreak", "break"), ("system prompt", "prompt")):
        assert {outer, inner} <= ss.present(f"please {outer} now"), (outer, inner)
    assert {"instruction", "instructions"} <= ss.present("the instructions")
