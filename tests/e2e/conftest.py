"""End-to-end fixtures: the real ``rag`` command in a subprocess against local servers.

* ``fake_llm_server`` / ``isolated_cache`` / ``planted_keys`` come from tests/support;
* ``scripted_llm`` turns the fake server into a scripted candidate + judge: a candidate
  request gets :func:`scripted_answer` of the question inside ``<用户提问>``, a judge request
  (recognised by the judge prompts' own wording) gets a JSON verdict from
  :data:`JUDGE_SCRIPT`, sample by sample; anything else (a query rewrite) gets
  :data:`SCRIPTED_REWRITE` as the rewrite prompt's JSON;
* ``rag`` runs ``python -m app …`` from the repository with every path it writes
  (``RAG_CACHE_DIR``, ``RAG_LOG_DIR``, ``--out``) under ``tmp_path`` and a scrubbed
  environment (no real keys, no ``RAG_*`` / ``LANGFUSE_*`` from the caller);
* ``langfuse_server`` records what the Langfuse SDK sends (public API + OTLP traces).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.paths import PACKAGE_DIR
from tests.support.fake_llm_server import FakeLLMServer
from tests.support.fixtures import (  # noqa: F401
    fake_llm_server,
    isolated_cache,
    planted_keys,
)
from tests.support.langfuse_server import LangfuseRecorder, LangfuseServer

REPO = PACKAGE_DIR.parent
PLANTED_LANGFUSE_SECRET = "sk-lf-PLANTED-langfuse-secret-fedcba9876543210"
PLANTED_LANGFUSE_PUBLIC = "pk-lf-PLANTED-langfuse-public-0011223344"

# The judge prompts' own wording (app/generation/prompts/judge/*_v1.py) → the metric.
JUDGE_MARKERS = {
    '"忠实度"': "faithfulness",
    '"正确性"': "correctness",
    '"相关性"': "relevance",
}
# Scores the scripted judge gives, per metric, to the 1st/2nd/3rd identical request.
JUDGE_SCRIPT: dict[str, tuple[int, ...]] = {
    "faithfulness": (4, 4, 4),
    "correctness": (5, 5, 2),
    "relevance": (3, 3, 3),
}
# the question block of the QA prompt's user template (the system prompt also names the
# tag in prose, so the block is the one with the question on its own lines)
_QUESTION = re.compile(r"<用户提问>\n(.*?)\n</用户提问>", re.S)
SCRIPTED_REWRITE = "张三负责的华南区 2026 年第一季度的相关数据是多少？"


def scripted_answer(question: str) -> str:
    """The candidate's scripted reply: distinct per question, cites [1], no refusal wording."""
    tag = hashlib.sha256(question.encode("utf-8")).hexdigest()[:10]
    return f"脚本答案-{tag}：详见参考资料 [1]。"


def _texts(body: dict[str, Any]) -> str:
    """System + message text of an OpenAI or Anthropic request body."""
    parts: list[str] = []
    system = body.get("system")
    if isinstance(system, str):
        parts.append(system)
    elif isinstance(system, list):
        parts.extend(str(b.get("text", "")) for b in system)
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content)
        else:
            parts.append(str(content))
    return "\n".join(parts)


def judge_metric_of(body: Any) -> str | None:
    if not isinstance(body, dict):
        return None
    text = _texts(body)
    if "答案质量评审专家" not in text:
        return None
    for marker, metric in JUDGE_MARKERS.items():
        if marker in text:
            return metric
    raise AssertionError(f"judge request for an unknown metric: {text[:200]}")


@dataclass
class ScriptedLLM:
    """The responder installed on the fake server; counts what it answered."""

    server: FakeLLMServer
    judge_calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    answer_calls: int = 0  # QA requests
    other_calls: int = 0  # anything else (query rewrites)
    _seen: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: Any) -> str:
        metric = judge_metric_of(body)
        with self._lock:
            if metric is not None:
                # identical requests (the n samples of one case × metric) get the
                # 1st, 2nd, 3rd scripted score in turn
                key = hashlib.sha256(
                    json.dumps(body.get("messages"), sort_keys=True).encode()
                ).hexdigest()
                nth = self._seen[key]
                self._seen[key] += 1
                self.judge_calls[metric] += 1
                scores = JUDGE_SCRIPT[metric]
                score = scores[nth % len(scores)]
                return json.dumps(
                    {"score": score, "reasoning": f"scripted {metric}", "hallucinations": []},
                    ensure_ascii=False,
                )
            found = _QUESTION.findall(_texts(body))
            if found:
                self.answer_calls += 1
            else:  # not a QA request: a query rewrite (JSON, as its prompt asks)
                self.other_calls += 1
                return json.dumps(
                    {"original": "…", "rewritten": SCRIPTED_REWRITE}, ensure_ascii=False
                )
        return scripted_answer(found[-1])

    def auth_values(self) -> set[str]:
        """Every credential header value the server received."""
        out: set[str] = set()
        for r in self.server.received:
            for name in ("authorization", "x-api-key"):
                if r.headers.get(name):
                    out.add(r.headers[name])
        return out


@pytest.fixture
def scripted_llm(fake_llm_server: FakeLLMServer) -> ScriptedLLM:  # noqa: F811
    scripted = ScriptedLLM(fake_llm_server)
    fake_llm_server.responder = scripted
    return scripted


@dataclass
class Result:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def report_path(self) -> Path:
        match = re.search(r"report: (\S+\.json)", self.stdout)
        assert match, f"no report path in stdout:\n{self.stdout}\n{self.stderr}"
        return Path(match.group(1))

    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.report_path().read_text(encoding="utf-8"))
        return data


@dataclass
class Rag:
    """Runs ``python -m app`` with private cache / log / report folders."""

    tmp: Path
    env: dict[str, str]

    @property
    def out(self) -> Path:
        return self.tmp / "out"

    @property
    def cache(self) -> Path:
        return Path(self.env["RAG_CACHE_DIR"])

    @property
    def logs(self) -> Path:
        return Path(self.env["RAG_LOG_DIR"])

    def written_dirs(self) -> list[Path]:
        return [self.out, self.cache, self.logs]

    def __call__(
        self, *args: str, extra_env: dict[str, str] | None = None, timeout: float = 90
    ) -> Result:
        env = dict(self.env)
        env.update(extra_env or {})
        proc = subprocess.run(
            [sys.executable, "-m", "app", *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout,
        )
        return Result(list(args), proc.returncode, proc.stdout, proc.stderr)


_SCRUB = ("RAG_", "LANGFUSE_", "OPENAI_", "ANTHROPIC_")


@pytest.fixture
def rag(
    tmp_path: Path,
    isolated_cache: Path,  # noqa: F811
    planted_keys: dict[str, str],  # noqa: F811
    fake_llm_server: FakeLLMServer,  # noqa: F811
) -> Rag:
    """The subprocess environment: the caller's, scrubbed of every ``RAG_*`` /
    ``LANGFUSE_*`` / ``OPENAI_*`` / ``ANTHROPIC_*``, plus the planted keys, the fake
    server's ``ANTHROPIC_BASE_URL`` and private cache / log folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB)}
    env.update(planted_keys)
    env.update(
        ANTHROPIC_BASE_URL=fake_llm_server.anthropic_base_url,
        RAG_CACHE_DIR=str(isolated_cache),
        RAG_LOG_DIR=str(tmp_path / "logs"),
        PYTHONIOENCODING="utf-8",
        COLUMNS="160",
    )
    return Rag(tmp_path, env)


def scan_for(needles: dict[str, str], dirs: list[Path], texts: dict[str, str]) -> list[str]:
    """Every place (file path or stream name) a needle occurs in, as bytes, binary-safe."""
    hits: list[str] = []
    encoded = {name: value.encode("utf-8") for name, value in needles.items()}
    for root in dirs:
        if not root.exists():
            continue
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            data = path.read_bytes()
            hits.extend(f"{name} in {path}" for name, raw in encoded.items() if raw in data)
    for stream, text in texts.items():
        data = text.encode("utf-8")
        hits.extend(f"{name} in {stream}" for name, raw in encoded.items() if raw in data)
    return hits


def files_under(dirs: list[Path]) -> list[Path]:
    return [p for d in dirs if d.exists() for p in d.rglob("*") if p.is_file()]


@pytest.fixture
def langfuse_server() -> Iterator[LangfuseRecorder]:
    """A local Langfuse (tests/support/langfuse_server.py); yields what it records."""
    with LangfuseServer() as server:
        yield server.recorder


@pytest.fixture
def kit() -> SimpleNamespace:
    """The helpers and constants above, for the test modules (which cannot import conftest)."""
    return SimpleNamespace(
        scripted_answer=scripted_answer,
        judge_script=JUDGE_SCRIPT,
        scan_for=scan_for,
        files_under=files_under,
        langfuse_secret=PLANTED_LANGFUSE_SECRET,
        langfuse_public=PLANTED_LANGFUSE_PUBLIC,
        repo=REPO,
    )
