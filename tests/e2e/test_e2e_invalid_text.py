"""Replies holding a lone surrogate (``"…[1] \\ud800"``) through the real ``rag`` command.

Before: ``rag eval run`` died in the response cache's ``put`` (``UnicodeEncodeError``, exit 1,
no report), a rerun or ``--resume`` died the same way, ``--no-cache`` stopped the whole run
with exit 2 at the judge's variable check, and ``rag ask`` crashed too. Now each such reply
is replaced (U+FFFD) at the provider boundary and the report names the calls.
"""

from __future__ import annotations

import json
from typing import Any

from tests.support.fake_llm_server import LONE_SURROGATE_REPLY

SURROGATE = "\ud800"


def _broken(scripted: Any) -> Any:
    """The scripted candidate and judge, each reply ending in an escaped lone surrogate."""

    def responder(body: Any) -> str:
        text: str = scripted(body)
        if text.startswith("{"):  # a judge verdict or a rewrite: the surrogate inside a value
            data = json.loads(text)
            key = "reasoning" if "reasoning" in data else "rewritten"
            data[key] = f"{data[key]} {SURROGATE}"
            return json.dumps(data, ensure_ascii=False)
        return f"{text} {SURROGATE}"

    return responder


def _args(server: Any, out: Any, *extra: str) -> list[str]:
    v1 = server.openai_base_url
    return [
        "eval", "run", "--suite", "smoke", "--limit", "3",
        "--model", f"openai:gpt-4o-mini@{v1}", "--judge", f"openai:gpt-4o@{v1}",
        "--out", str(out), *extra,
    ]  # fmt: skip


def test_a_run_of_lone_surrogate_replies_finishes_and_names_the_calls(
    scripted_llm: Any, rag: Any
) -> None:
    server = scripted_llm.server
    server.responder = _broken(scripted_llm)
    first = rag(*_args(server, rag.out))
    assert "Traceback" not in first.stderr, first.stderr[-2000:]
    assert first.returncode in (0, 1), first.stderr[-2000:]
    report = first.report()
    assert report["totals"]["cases_done"] == 3 and report["totals"]["cases_with_errors"] == 0
    for case in report["cases"]:
        assert case["answer"].endswith("\ufffd"), case["answer"]
        assert case["metrics"]["faithfulness"]["value"] is not None  # the judge was usable
        notes = case["invalid_text"]
        assert any(n.startswith("generation call (system/kb_qa_v2)") for n in notes), notes
        assert any(n.startswith("judge call (judge/faithfulness_v1)") for n in notes), notes
    assert report["totals"]["engine"]["invalid_text_replies"] == server.requests
    assert "not valid Unicode" in first.stdout

    # the same run again (what --resume or a rerun meets): served from the cache, still named
    requests = server.requests
    again = rag(*_args(server, rag.out))
    assert "Traceback" not in again.stderr and again.returncode in (0, 1)
    assert server.requests == requests
    cached = again.report()["cases"]
    assert all(any("from the cache" in n for n in c["invalid_text"]) for c in cached)

    # --no-cache: the judge's variable check sees the replaced text, not a lone surrogate
    fresh = rag(*_args(server, rag.out, "--no-cache"))
    assert "Traceback" not in fresh.stderr, fresh.stderr[-2000:]
    assert fresh.returncode in (0, 1), fresh.stderr[-2000:]
    assert fresh.report()["totals"]["cases_done"] == 3


def test_ask_with_a_lone_surrogate_reply(fake_llm_server: Any, rag: Any) -> None:
    fake_llm_server.responder = lambda body: LONE_SURROGATE_REPLY
    model = f"openai:gpt-4o-mini@{fake_llm_server.openai_base_url}"
    result = rag("ask", "--acl", "employee", "--model", model, "年假有几天？")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "\ufffd" in result.stdout and "Traceback" not in result.stderr
    assert "lone surrogate" in result.stderr


def test_feedback_with_bytes_that_are_not_utf8_is_refused(rag: Any, kit: Any) -> None:
    import subprocess
    import sys

    user = b"u\xed\xa0\x80"  # CESU-8 of U+D800: Python's argv holds surrogate escapes
    proc = subprocess.run(
        [sys.executable.encode(), b"-m", b"app", b"feedback", b"abc", b"--user", user, b"--down"],
        cwd=kit.repo,
        env=rag.env,
        capture_output=True,
        timeout=60,
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2, err
    assert "Traceback" not in err and "--user" in err and "not valid text" in err
