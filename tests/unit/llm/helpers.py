from __future__ import annotations

from app.llm.types import ChatRequest, Message


def chat(
    text: str = "hello", *, system: str | None = "You are terse.", **kw: object
) -> ChatRequest:
    return ChatRequest(
        model="m",
        system=system,
        messages=(Message("user", text),),
        **kw,  # type: ignore[arg-type]
    )
