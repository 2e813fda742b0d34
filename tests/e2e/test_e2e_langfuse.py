"""``rag eval run --langfuse``: the real Langfuse SDK, in a subprocess, against a local
server that records what it receives (dataset items, OTLP trace spans, scores) — and the
clear, traceback-free exit 2 when the Langfuse variables are missing."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace
from typing import Any

import pytest


def _eval_args(server: Any, out: Any, limit: str = "3") -> list[str]:
    v1 = server.openai_base_url
    return [
        "eval",
        "run",
        "--suite",
        "smoke",
        "--limit",
        limit,
        "--model",
        f"openai:gpt-4o-mini@{v1}",
        "--judge",
        f"openai:gpt-4o@{v1}",
        "--out",
        str(out),
        "--quiet",
        "--langfuse",
    ]


def test_langfuse_upload_items_traces_and_scores(
    planted_keys: dict[str, str],
    scripted_llm: Any,
    rag: Any,
    langfuse_server: Any,
    kit: SimpleNamespace,
) -> None:
    env = {
        "LANGFUSE_PUBLIC_KEY": kit.langfuse_public,
        "LANGFUSE_SECRET_KEY": kit.langfuse_secret,
        "LANGFUSE_HOST": langfuse_server.url,
    }
    result = rag(*_eval_args(scripted_llm.server, rag.out), extra_env=env)
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    assert "langfuse: 3 items, 3 traces" in result.stderr, result.stderr
    report = result.report()
    cases = {c["id"]: c for c in report["cases"]}
    assert len(cases) == 3
    rec = langfuse_server
    assert rec.unknown == [], rec.unknown  # every call the SDK made was one we emulate
    # the SDK authenticated with the planted keys (and nothing wrote the secret anywhere)
    assert f"{kit.langfuse_public}:{kit.langfuse_secret}" in rec.basic_credentials()
    needles = {"LANGFUSE_SECRET_KEY": kit.langfuse_secret, **planted_keys}
    hits = kit.scan_for(needles, rag.written_dirs(), {"out": result.stdout, "err": result.stderr})
    assert hits == [], hits

    # one dataset (the suite version) and one item per case
    (dataset,) = rec.bodies("POST", "/api/public/v2/datasets")
    suite = report["meta"]["datasets"][0]
    assert dataset["name"] == f"rag-starter/{suite['name']}_v{suite['version']}"
    items = {i["id"]: i for i in rec.bodies("POST", "/api/public/dataset-items")}
    assert sorted(i["metadata"]["case_id"] for i in items.values()) == sorted(cases)
    for item in items.values():
        case = cases[item["metadata"]["case_id"]]
        assert item["input"]["question"] == case["question"]
        assert item["datasetName"] == dataset["name"]

    # one trace per case, linked to its item, carrying the prompt version and the answer
    tasks = [s for s in rec.spans if s["name"] == "experiment-item-task"]
    assert len(tasks) == 3 and len({s["trace_id"] for s in tasks}) == 3
    case_of_trace: dict[str, str] = {}
    for span in tasks:
        attrs = span["attrs"]
        item = items[attrs["langfuse.experiment.item.id"]]
        case = cases[item["metadata"]["case_id"]]
        case_of_trace[span["trace_id"]] = case["id"]
        assert attrs["langfuse.experiment.name"] == report["run_id"]
        version = json.loads(attrs["langfuse.observation.metadata.prompt_version"])
        assert version == case["trace"]["prompt_version"] and version.startswith("system/")
        assert attrs["langfuse.observation.output"] == case["answer"]
    assert sorted(case_of_trace.values()) == sorted(cases)

    # one score per non-null metric of each case, on that case's trace, with its value
    got: dict[str, dict[str, float]] = {cid: {} for cid in cases}
    for score in rec.scores():
        cid = case_of_trace[score["traceId"]]
        assert score["name"] not in got[cid], f"duplicate score {score['name']} for {cid}"
        got[cid][score["name"]] = score["value"]
    for cid, case in cases.items():
        expected = {
            name: float(m["value"]) for name, m in case["metrics"].items() if m["value"] is not None
        }
        assert "faithfulness" in expected  # the judge scores are among them
        assert got[cid] == expected, cid


def test_langfuse_without_credentials_exits_2_naming_them(
    planted_keys: dict[str, str], scripted_llm: Any, rag: Any, kit: SimpleNamespace
) -> None:
    # none set (the rag fixture scrubs every LANGFUSE_* of the caller)
    result = rag(*_eval_args(scripted_llm.server, rag.out))
    assert result.returncode == 2, (result.stdout, result.stderr)
    for name in ("LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "LANGFUSE_HOST"):
        assert name in result.stderr, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    # it fails before the suite: no model was called, no report written
    assert scripted_llm.server.requests == 0
    assert not rag.out.exists() or not any(rag.out.iterdir())

    # only the public key set: the message names exactly the two missing ones
    result = rag(
        *_eval_args(scripted_llm.server, rag.out),
        extra_env={"LANGFUSE_PUBLIC_KEY": kit.langfuse_public},
    )
    assert result.returncode == 2, result.stderr
    assert "LANGFUSE_SECRET_KEY" in result.stderr and "LANGFUSE_HOST" in result.stderr
    assert "LANGFUSE_PUBLIC_KEY" not in result.stderr
    assert "Traceback" not in result.stderr
    assert scripted_llm.server.requests == 0


@pytest.mark.parametrize(
    "echo_paths",
    [("/",), ("/api/public/dataset-items",)],
    ids=["every-call", "dataset-items"],
)
def test_langfuse_host_echoing_the_secret_key_never_prints_it(
    echo_paths: tuple[str, ...],
    planted_keys: dict[str, str],
    scripted_llm: Any,
    rag: Any,
    kit: SimpleNamespace,
) -> None:
    """Issue 12: a host that echoed the secret key in its error had it printed in full."""
    from tests.support.langfuse_server import LangfuseServer

    with LangfuseServer(echo_credentials=True, echo_paths=echo_paths) as server:
        env = {
            "LANGFUSE_PUBLIC_KEY": kit.langfuse_public,
            "LANGFUSE_SECRET_KEY": kit.langfuse_secret,
            "LANGFUSE_HOST": server.url,
        }
        result = rag(*_eval_args(scripted_llm.server, rag.out, limit="1"), extra_env=env)
        posted = [p for m, p, _ in server.recorder.requests if m == "POST"]
    assert posted, "the SDK reached the echoing host (else the test proves nothing)"
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "langfuse: upload to" in result.stderr and "failed" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    secret = kit.langfuse_secret
    basic = base64.b64encode(f"{kit.langfuse_public}:{secret}".encode()).decode()
    needles = {
        "LANGFUSE_SECRET_KEY": secret,
        "its head": secret[:14],
        "its tail": secret[-14:],
        "Basic credentials": basic[:24],
        **planted_keys,
    }
    hits = kit.scan_for(needles, rag.written_dirs(), {"out": result.stdout, "err": result.stderr})
    assert hits == [], (hits, result.stderr)
