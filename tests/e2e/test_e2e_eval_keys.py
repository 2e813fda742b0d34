"""Issue 3 "Done when": a planted key appears nowhere a run writes.

``rag eval run`` runs in a subprocess with planted fake keys against the local fake
server through the real OpenAI / Anthropic SDKs — cleanly, and with faults injected
(a 500 that is retried, then a 401 whose error body quotes the credentials it received,
as some APIs do). Then every file under the report, cache and log folders (bytes, so the
SQLite cache, checkpoints and their WAL files too) and both output streams are searched
for every planted key. The keys must have reached the server's Authorization /
x-api-key headers — otherwise their absence would prove nothing.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.fake_llm_server import status

PROVIDERS = {
    # candidate, judge (the judge must not be weaker: JUDGE_TIERS)
    "openai": ("openai:gpt-4o-mini@{v1}", "openai:gpt-4o@{v1}"),
    "anthropic": ("anthropic:claude-sonnet-4-6", "anthropic:claude-opus-4-7"),
}


def credentials(received: Any) -> str:
    return " ".join(received.headers.get(h, "") for h in ("authorization", "x-api-key"))


def _needles(keys: dict[str, str], kit: SimpleNamespace) -> dict[str, str]:
    needles = dict(keys)
    needles["LANGFUSE_SECRET_KEY"] = kit.langfuse_secret
    # the distinctive middle of each key too: a "masked" key that keeps most of it leaks
    for name, value in list(needles.items()):
        needles[f"{name} (core)"] = value[8:-6]
    return needles


@pytest.mark.parametrize("faults", [False, True], ids=["clean", "faults"])
@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_planted_keys_appear_nowhere_a_run_writes(
    planted_keys: dict[str, str],
    scripted_llm: Any,
    rag: Any,
    kit: SimpleNamespace,
    provider: str,
    faults: bool,
) -> None:
    server = scripted_llm.server
    model, judge = (p.format(v1=server.openai_base_url) for p in PROVIDERS[provider])
    if faults:
        # FIFO over all requests: the 1st gets a 500 (retryable), the 2nd a 401 (not);
        # both error bodies quote the credentials the server received
        server.script(status(500, retry_after=0, echo_auth=True), status(401, echo_auth=True))
    result = rag(
        "eval",
        "run",
        "--suite",
        "smoke",
        "--limit",
        "5",
        "--model",
        model,
        "--judge",
        judge,
        "--out",
        str(rag.out),
        "--quiet",
        extra_env={
            "LANGFUSE_SECRET_KEY": kit.langfuse_secret,
            "LANGFUSE_PUBLIC_KEY": kit.langfuse_public,
        },
    )
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    report = result.report()
    assert report["meta"]["candidate"]["offline"] is False
    assert report["totals"]["cases_done"] == 5

    # the plant was live: the key of the provider in use reached the server on every
    # request, in the Authorization (OpenAI; Anthropic SDK >= 2) or x-api-key header
    env_key = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    live = [r for r in server.received if planted_keys[env_key] in credentials(r)]
    assert server.received and len(live) == len(server.received), scripted_llm.auth_values()
    # answers + judges went through the server (minus the judges of a case the 401 failed)
    assert server.requests >= 4 * (1 + 3 * 3)

    if faults:
        # both faults were served and took their error paths
        assert not server._script, "the scripted faults were not all served"
        engine = report["totals"]["engine"]
        assert engine["retries"] >= 1, engine  # the 500 was retried
        assert engine["errors"] >= 1, engine  # the 401 was not
        errors = [e for case in report["cases"] for e in case["errors"]]
        # recorded in the report (the run went on), with the server's echo of the
        # credentials in it: only redaction stands between the key and the report
        assert any("401" in e and "credentials:" in e for e in errors), errors

    written = kit.files_under(rag.written_dirs())
    assert any(p.suffix == ".json" for p in written) and any(
        p.name.endswith(".sqlite3") for p in written
    ), written  # the scan covers the report and the SQLite cache / checkpoint
    hits = kit.scan_for(
        _needles(planted_keys, kit),
        rag.written_dirs(),
        {"stdout": result.stdout, "stderr": result.stderr},
    )
    assert hits == [], hits
