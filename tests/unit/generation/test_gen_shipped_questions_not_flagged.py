"""The injection detector flags no ordinary shipped question: every question and user turn of
the smoke, full and hard suites' cases not tagged ``injection`` passes detect_injection clean
(and every tagged one is flagged). A normaliser change (app.text) or a pattern change that
starts flagging an ordinary question fails here."""

from __future__ import annotations

from app.eval.datasets.case import load_suite
from app.generation.pipeline.safety import detect_injection


def test_no_ordinary_shipped_question_is_flagged() -> None:
    texts: list[tuple[str, str]] = []
    attacks: list[tuple[str, str]] = []
    for name in ("smoke", "full", "hard"):
        for case in load_suite(name).cases:
            if "injection" in case.tags:
                attacks.append((case.id, case.question))
                continue
            texts.append((case.id, case.question))
            texts.extend((case.id, t.content) for t in case.history if t.role == "user")
    assert len(texts) > 480
    assert [cid for cid, text in texts if detect_injection(text).detected] == []
    assert attacks and all(detect_injection(text).detected for _, text in attacks)
