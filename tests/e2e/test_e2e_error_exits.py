"""Exit codes when things go wrong outside the suite's control.

Both tests pin bugs this folder found (and that were fixed): a run where every case
failed must not pass, and a failing Langfuse upload is a clean failure, not a traceback.
"""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

from tests.support.fake_llm_server import status


def _run_args(server: Any, out: Any) -> list[str]:
    v1 = server.openai_base_url
    return [
        "eval",
        "run",
        "--suite",
        "smoke",
        "--limit",
        "3",
        "--model",
        f"openai:gpt-4o-mini@{v1}",
        "--judge",
        f"openai:gpt-4o@{v1}",
        "--out",
        str(out),
        "--quiet",
    ]


def test_a_run_where_every_case_failed_does_not_pass(
    planted_keys: dict[str, str], scripted_llm: Any, rag: Any
) -> None:
    server = scripted_llm.server
    server.script(*[status(401) for _ in range(3)])  # every candidate call: 401, not retried
    result = rag(*_run_args(server, rag.out))
    assert "Traceback" not in result.stderr
    report = result.report()
    assert report["totals"]["cases_with_errors"] == 3 == report["totals"]["cases_done"]
    assert server.requests == 3  # the three answers; no judge ran
    # the run measured nothing: it must not be a pass
    assert report["status"] != "pass", report["verdicts"]
    assert result.returncode == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_langfuse_unreachable_is_a_clean_failure(
    planted_keys: dict[str, str], scripted_llm: Any, rag: Any, kit: SimpleNamespace
) -> None:
    env = {
        "LANGFUSE_PUBLIC_KEY": kit.langfuse_public,
        "LANGFUSE_SECRET_KEY": kit.langfuse_secret,
        "LANGFUSE_HOST": f"http://127.0.0.1:{_closed_port()}",
    }
    result = rag(*_run_args(scripted_llm.server, rag.out), "--langfuse", extra_env=env)
    assert result.report()["totals"]["cases_done"] == 3  # the report is written first
    assert (
        kit.scan_for({"LANGFUSE_SECRET_KEY": kit.langfuse_secret}, [], {"e": result.stderr}) == []
    )
    assert result.returncode != 0
    assert "langfuse" in result.stderr.lower()
    assert "Traceback" not in result.stderr, result.stderr[-1500:]
