"""Kill the runner mid-run (SIGKILL), resume it, and count the calls at a local server.

The candidate and the judge are ``openai:<model>@http://127.0.0.1:<port>/v1``: a tiny
OpenAI-compatible server in this test answers and records every request it serves. A
first run is killed by the server itself the moment the last case sends its first
request (every earlier case is then finished and checkpointed); ``--resume RUN_ID``
finishes it. The served requests of killed + resumed must equal, request for request,
those of an uninterrupted run (no call repeated, none missing), and the final report must
equal the uninterrupted run's case for case.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.paths import PACKAGE_DIR

KILL_ON = "那个人常驻哪里"  # mini-005, the last case by id


class Server(ThreadingHTTPServer):
    served: list[str]
    bodies: dict[str, str]
    kill_pid: int | None


class Handler(BaseHTTPRequestHandler):
    server: Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        data = json.loads(body)
        text = json.dumps(data["messages"], ensure_ascii=False)
        if self.server.kill_pid is not None and KILL_ON in text:
            os.kill(self.server.kill_pid, signal.SIGKILL)
            self.server.kill_pid = None
            self.send_response(503)
            self.end_headers()
            return
        digest = hashlib.sha256(body).hexdigest()
        self.server.served.append(digest)
        self.server.bodies[digest] = text
        if data["model"] == "gpt-4o":
            content = '{"score": 4, "reasoning": "supported"}'
        else:
            content = "根据参考资料，答案见文档 [1]。"
        payload = json.dumps(
            {
                "id": f"chatcmpl-{len(self.server.served)}",
                "object": "chat.completion",
                "created": 0,
                "model": data["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server() -> Any:
    srv = Server(("127.0.0.1", 0), Handler)
    srv.served = []
    srv.bodies = {}
    srv.kill_pid = None
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def rag(args: list[str], root: Path, cache: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(RAG_ROOT=str(root), RAG_CACHE_DIR=str(cache), RAG_LOG_DIR=str(root / "logs"))
    return subprocess.Popen(
        [sys.executable, "-m", "app", *args],
        cwd=PACKAGE_DIR.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def report_of(stdout: str) -> dict[str, Any]:
    match = re.search(r"report: (\S+\.json)", stdout)
    assert match, stdout
    data: dict[str, Any] = json.loads(Path(match.group(1)).read_text(encoding="utf-8"))
    return data


def cases(report: dict[str, Any]) -> dict[str, Any]:
    return {
        c["id"]: (
            {k: (v["value"], v["reason"]) for k, v in c["metrics"].items() if k != "latency_s"},
            c["answer"],
        )
        for c in report["cases"]
    }


@pytest.mark.slow
def test_kill_and_resume_repeats_no_call(eval_root: Path, server: Server, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    args = [
        "eval",
        "run",
        "--suite",
        "mini",
        "--model",
        f"openai:qwen2-7b@{url}",
        "--judge",
        f"openai:gpt-4o@{url}",
        "--judge-samples",
        "2",
        "--concurrency",
        "1",
        "--quiet",
        "--out",
        str(eval_root / "reports"),
    ]

    # 1. the uninterrupted reference run (its own cache)
    proc = rag(args, eval_root, tmp_path / "cache-a")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), err
    reference = report_of(out)
    expected = Counter(server.served)
    assert len(server.served) > 10

    # 2. the same run, killed (SIGKILL) by the server when the last case starts
    server.served = []
    proc = rag(args, eval_root, tmp_path / "cache-b")
    server.kill_pid = proc.pid
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, (out, err)
    run_id = re.search(r"run (\S+)", err)
    assert run_id, err
    killed = list(server.served)
    assert 0 < len(killed) < len(server.served) + sum(expected.values())

    # 3. resume: only the unfinished case runs
    proc = rag(
        [
            "eval",
            "run",
            "--suite",
            "mini",
            "--resume",
            run_id.group(1),
            "--quiet",
            "--out",
            str(eval_root / "reports"),
        ],
        eval_root,
        tmp_path / "cache-b",
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), err
    resumed = report_of(out)
    resumed_calls = server.served[len(killed) :]

    got = Counter(killed) + Counter(resumed_calls)
    diff = [server.bodies[h][:3000] for h in (got - expected) + (expected - got)]
    assert got == expected, diff  # none repeated, none missing
    assert len(resumed_calls) < sum(expected.values()) / 2
    assert resumed["partial"] is False and resumed["meta"]["resumed_from"] == run_id.group(1)
    assert cases(resumed) == cases(reference)
    # issue 12: the totals are those of every process of the run, not of the last one
    assert reference["totals"]["engine"]["calls"] == sum(expected.values())
    made = len(killed) + len(resumed_calls)
    # + the request that triggered the kill, if the killed process recorded its counters
    # after sending it (another case finishing in between)
    assert made <= resumed["totals"]["engine"]["calls"] <= made + 1
    assert resumed["totals"]["engine"]["completions"] == sum(expected.values())

    # 4. resuming the finished run says so and writes nothing
    before = sorted(p.name for p in (eval_root / "reports").iterdir())
    served = len(server.served)
    proc = rag(
        [
            "eval",
            "run",
            "--resume",
            run_id.group(1),
            "--quiet",
            "--out",
            str(eval_root / "reports"),
        ],
        eval_root,
        tmp_path / "cache-b",
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), err
    assert "had already finished: nothing to resume, nothing written" in err
    assert sorted(p.name for p in (eval_root / "reports").iterdir()) == before
    assert len(server.served) == served
    assert report_of(out) == resumed
