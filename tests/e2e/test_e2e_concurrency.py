"""`rag eval run --concurrency N` bounds the provider requests in flight, as the server sees them.

With 200 ms of server latency and 10 cases × (1 answer + 3 judge metrics × 3 samples), a run
at --concurrency 3 must keep the server's peak in-flight count at exactly 3: never above (the
bound), and reaching it (the bound is not throttling the run to one call at a time).
"""

from __future__ import annotations

from typing import Any


def test_concurrency_bounds_requests_in_flight(scripted_llm: Any, rag: Any) -> None:
    server = scripted_llm.server
    server.latency_s = 0.2
    v1 = server.openai_base_url
    result = rag(
        "eval", "run", "--suite", "smoke", "--limit", "10", "--concurrency", "3",
        "--model", f"openai:gpt-4o-mini@{v1}", "--judge", f"openai:gpt-4o@{v1}",
        "--quiet", "--out", str(rag.out),
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    stats = server.stats()
    assert stats["requests"] >= 10 * (1 + 3 * 3)  # every case answered and judged
    assert stats["peak_in_flight"] == 3
