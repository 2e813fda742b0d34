"""The real engine (offline providers, local servers) recording every request it is asked."""

from __future__ import annotations

from collections import Counter

from app.llm.engine import Engine, EngineConfig
from app.llm.spec import ModelRef
from app.llm.types import ChatRequest, Completion


class RecordingEngine(Engine):
    def __init__(self) -> None:
        super().__init__(EngineConfig(cache=False))
        self.requests: list[tuple[ModelRef | str, ChatRequest]] = []

    async def generate(
        self, provider: ModelRef | str, request: ChatRequest, sample_index: int = 0
    ) -> Completion:
        self.requests.append((provider, request))
        return await super().generate(provider, request, sample_index)

    def judge_metrics(self) -> Counter[str]:
        """How many judge requests each judge metric made."""
        return Counter(r.metadata["judge_metric"] for _, r in self.requests if r.purpose == "judge")
