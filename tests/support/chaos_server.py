"""A fault-injecting OpenAI-compatible server on 127.0.0.1: issue 12's nightly mix, seeded.

Per request, drawn from a seeded RNG keyed by the request's identity — its body and how many
times that body came before — never by arrival order (defaults = issue 12's mix):

======================  =====  ================================================================
fault                   share  what the client sees
======================  =====  ================================================================
``rate_limited``        10 %   429 with ``Retry-After: retry_after_s``
``server_error``         5 %   500
``hang``                 2 %   no answer for ``hang_s`` (past the client's timeout)
``bad_judge_json``       2 %   of *judge* requests: a 200 whose text is not the JSON asked for
``bad_body``             1 %   a 200 that is not a completion (HTML, ``null`` message, cut JSON, …
                               every :data:`~tests.support.fake_llm_server.BAD_BODIES` kind)
======================  =====  ================================================================

Everything else gets a deterministic answer (:func:`chaos_responder`): a judge request
(the judge prompts' wording) gets ``{"score": 4, …}`` — so a run that scored a malformed
judge reply would show a score other than 4 — a QA request a scripted answer per question,
anything else (a query rewrite) the rewrite prompt's JSON. A fault-free server
(``FaultMix.none()``) gives the same answers, so two runs can be compared case for case.

Why by identity: with one RNG drawn in arrival order, which request gets which fault depends
on the client's timing (16 requests in flight, retries, the machine's load), so the same code
gave 6 to 13 errored cases of 1,000 on the same seed, and two commits could not be compared.
Keyed by (seed, body digest, occurrence of that body), the k-th attempt with a given body
draws the same fault in every run: a retry or a repair is a new draw (another occurrence or
another body), and identical requests (a judge's samples, a repeated case) share one
sequence of fates whichever of them arrives first.

In-process: ``with chaos_server(seed=1) as server:``. Out of process (the benchmark)::

    python tests/support/chaos_server.py --seed 1 --latency 0.1   # prints "READY <port>"

``GET /_stats`` then also reports the faults injected so far.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import threading
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `tests.support` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.support.fake_llm_server import (
    BAD_BODIES,
    Action,
    FakeLLMServer,
    bad_body,
    hang,
    rate_limited,
    reply,
    server_error,
)

JUDGE_MARK = "答案质量评审专家"  # in every judge prompt (app/generation/prompts/judge/)
CHAOS_SCORE = 4
_QUESTION = re.compile(r"<用户提问>\n(.*?)\n</用户提问>", re.S)
#: judge replies that must never be scored: prose, cut JSON, a score out of range, …
BAD_JUDGE_REPLIES = (
    "I would rate this answer 2 out of 5.",
    '{"score": 1, "reasoning": "cut off',
    '{"score": 9, "reasoning": "out of range"}',
    '{"score": "two", "reasoning": "not a number"}',
    '{"reasoning": "no score at all"}',
    "```json\n[1, 2]\n```",
)


@dataclass(frozen=True)
class FaultMix:
    rate_limited: float = 0.10
    server_error: float = 0.05
    hang: float = 0.02
    bad_judge_json: float = 0.02
    bad_body: float = 0.01
    retry_after_s: float = 1.0
    hang_s: float = 30.0

    @classmethod
    def none(cls) -> FaultMix:
        return cls(rate_limited=0.0, server_error=0.0, hang=0.0, bad_judge_json=0.0, bad_body=0.0)


def _texts(body: Any) -> str:
    if not isinstance(body, dict):
        return ""
    parts: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
        elif content is not None:
            parts.append(str(content))
    return "\n".join(parts)


def is_judge(body: Any) -> bool:
    return JUDGE_MARK in _texts(body)


def chaos_responder(body: Any) -> str:
    """The deterministic answer to a request that draws no fault."""
    text = _texts(body)
    if JUDGE_MARK in text:
        return json.dumps(
            {"score": CHAOS_SCORE, "reasoning": "chaos judge", "hallucinations": []},
            ensure_ascii=False,
        )
    found = _QUESTION.findall(text)
    if found:
        tag = hashlib.sha256(found[-1].encode("utf-8")).hexdigest()[:10]
        return f"脚本答案-{tag}：详见参考资料 [1]。"
    return json.dumps(
        {"original": "…", "rewritten": "张三负责的华南区 2026 年第一季度的相关数据是多少？"},
        ensure_ascii=False,
    )


def request_identity(body: Any) -> str:
    """The digest of a request body (canonical JSON): what a fault draw is keyed by."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class FaultChooser:
    """Picks a fault (or none) per request, seeded by the request's identity (the module
    docstring); counts what it injected."""

    def __init__(self, mix: FaultMix, seed: int) -> None:
        self.mix = mix
        self.seed = seed
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self._seen: Counter[str] = Counter()  # body digest -> attempts with it so far
        self._bad_kinds = sorted(BAD_BODIES)

    def __call__(self, number: int, body: Any) -> Action | None:
        m = self.mix
        identity = request_identity(body)
        with self._lock:
            occurrence = self._seen[identity]
            self._seen[identity] += 1
            rng = random.Random(f"{self.seed}:{identity}:{occurrence}")
            u = rng.random()
            pick = rng.randrange(1 << 30)
            kind: str | None = None
            edge = 0.0
            for name in ("rate_limited", "server_error", "hang", "bad_body"):
                edge += getattr(m, name)
                if u < edge:
                    kind = name
                    break
            if kind is None and is_judge(body) and u < edge + m.bad_judge_json:
                kind = "bad_judge_json"
            if kind is not None:
                self.counts[kind] += 1
        if kind == "rate_limited":
            return rate_limited(m.retry_after_s)
        if kind == "server_error":
            return server_error(500)
        if kind == "hang":
            return hang(m.hang_s)
        if kind == "bad_body":
            return bad_body(self._bad_kinds[pick % len(self._bad_kinds)])
        if kind == "bad_judge_json":
            return reply(BAD_JUDGE_REPLIES[pick % len(BAD_JUDGE_REPLIES)])
        return None


class ChaosServer(FakeLLMServer):
    """:class:`FakeLLMServer` with a :class:`FaultChooser` and :func:`chaos_responder`."""

    def __init__(
        self, *, mix: FaultMix | None = None, seed: int = 0, latency_s: float = 0.0, port: int = 0
    ) -> None:
        self.faults = FaultChooser(mix or FaultMix(), seed)
        super().__init__(
            latency_s=latency_s, responder=chaos_responder, port=port, chooser=self.faults
        )

    def stats(self) -> dict[str, Any]:  # type: ignore[override]
        data: dict[str, Any] = dict(super().stats())
        with self.faults._lock:
            data["faults"] = dict(self.faults.counts)
        return data


def chaos_server(**kw: Any) -> ChaosServer:
    return ChaosServer(**kw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    parser.add_argument("--no-faults", action="store_true", help="the fault-free twin")
    for f in fields(FaultMix):
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=float, default=None)
    args = parser.parse_args(argv)
    mix = FaultMix.none() if args.no_faults else FaultMix()
    overrides = {
        f.name: getattr(args, f.name) for f in fields(FaultMix) if getattr(args, f.name) is not None
    }
    mix = FaultMix(**{**{f.name: getattr(mix, f.name) for f in fields(FaultMix)}, **overrides})
    server = ChaosServer(mix=mix, seed=args.seed, latency_s=args.latency, port=args.port).start()
    print(f"READY {server.port}", flush=True)
    try:
        sys.stdin.read()  # runs until stdin closes
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
