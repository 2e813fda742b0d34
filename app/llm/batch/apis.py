"""The two batch APIs, each through its official SDK client (the provider's own, so the key,
base URL and HTTP settings are the same as for a single call).

Anthropic Message Batches: ``POST /v1/messages/batches`` with ``{custom_id, params}`` per
request, ``GET …/{id}`` until ``processing_status == "ended"``, then the JSONL at
``results_url`` (``succeeded`` / ``errored`` / ``canceled`` / ``expired`` per request).

OpenAI Batch: upload a JSONL file (``purpose=batch``) of ``{custom_id, method, url, body}``,
``POST /v1/batches`` (``completion_window=24h``), ``GET /v1/batches/{id}`` until a final
status (``completed`` / ``failed`` / ``expired`` / ``cancelled``), then the output file (one
``{custom_id, response: {status_code, body}}`` a line) and the error file.

The request body is the one the provider sends for a single call (its ``params``), so a
batched call and a direct one ask the same thing and share a cache key.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.errors import ProviderError
from app.llm.providers.base import Provider, sdk_call
from app.llm.types import ChatRequest, Completion, Usage

# per-request error types that are worth one more submission
_TRANSIENT = frozenset(
    {
        "expired",
        "canceled",
        "cancelled",
        "api_error",
        "overloaded_error",
        "rate_limit_error",
        "batch_expired",
        "batch_cancelled",
        "server_error",
        "rate_limit_exceeded",
    }
)


@dataclass(frozen=True)
class BatchItem:
    custom_id: str
    request: ChatRequest
    model: str


@dataclass(frozen=True)
class BatchStatus:
    ended: bool
    state: str  # the API's own word: in_progress, ended, completed, expired, failed, …
    counts: dict[str, int]


class BatchAPI(Protocol):
    family: str

    async def submit(self, items: Sequence[BatchItem]) -> str: ...

    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(self, batch_id: str) -> dict[str, Completion | ProviderError]: ...


def item_error(label: str, custom_id: str, kind: str, message: str) -> ProviderError:
    return ProviderError(
        f"{label}: batch request {custom_id[:12]}… {kind}: {message}"[:500],
        provider=label,
        retryable=kind in _TRANSIENT,
    )


def _client(provider: Provider) -> Any:
    client = getattr(provider, "_client", None)
    if client is None:  # pragma: no cover - every SDK provider has one
        raise ProviderError(f"{provider.spec}: this provider has no SDK client for batches")
    return client


class AnthropicBatches:
    family = "anthropic"

    def __init__(self, provider: Provider) -> None:
        from app.llm.providers.anthropic import AnthropicProvider

        if not isinstance(provider, AnthropicProvider):  # pragma: no cover - wiring error
            raise TypeError(provider)
        self.provider = provider
        self.label = str(provider.spec)
        self._client = _client(provider)

    async def _sdk(self, call: Any) -> Any:
        response, _ = await sdk_call(
            call, sdk=self.provider._sdk, label=self.label, secret=self.provider._secret
        )
        return response

    async def submit(self, items: Sequence[BatchItem]) -> str:
        spec = self.provider.spec
        requests = [
            {
                "custom_id": it.custom_id,
                "params": self.provider.payload(it.request, model=it.model, base_url=spec.base_url),
            }
            for it in items
        ]
        batch = await self._sdk(lambda: self._client.messages.batches.create(requests=requests))
        return str(batch.id)

    async def status(self, batch_id: str) -> BatchStatus:
        b = await self._sdk(lambda: self._client.messages.batches.retrieve(batch_id))
        rc = b.request_counts
        counts = {
            k: int(getattr(rc, k, 0) or 0)
            for k in ("processing", "succeeded", "errored", "canceled", "expired")
        }
        return BatchStatus(
            ended=b.processing_status == "ended", state=b.processing_status, counts=counts
        )

    async def results(self, batch_id: str) -> dict[str, Completion | ProviderError]:
        out: dict[str, Completion | ProviderError] = {}
        stream = await self._sdk(lambda: self._client.messages.batches.results(batch_id))
        async for row in stream:
            result = row.result
            if result.type == "succeeded":
                out[row.custom_id] = _anthropic_completion(result.message, row.custom_id)
            elif result.type == "errored":
                err = getattr(result.error, "error", None)
                out[row.custom_id] = item_error(
                    self.label,
                    row.custom_id,
                    getattr(err, "type", "error"),
                    getattr(err, "message", "errored"),
                )
            else:  # canceled / expired
                out[row.custom_id] = item_error(
                    self.label, row.custom_id, result.type, "not processed before the batch ended"
                )
        return out


def _anthropic_completion(message: Any, custom_id: str) -> Completion:
    text = "".join(b.text for b in message.content if getattr(b, "type", "") == "text")
    u = message.usage
    return Completion(
        text=text,
        provider="anthropic",
        model=message.model,
        finish_reason=message.stop_reason,
        usage=Usage(
            input_tokens=u.input_tokens or 0,
            output_tokens=u.output_tokens or 0,
            cache_read_tokens=getattr(u, "cache_read_input_tokens", None) or 0,
            cache_write_tokens=getattr(u, "cache_creation_input_tokens", None) or 0,
        ),
        request_id=message.id,
    )


_OPENAI_FINAL = frozenset({"completed", "failed", "expired", "cancelled"})


class OpenAIBatches:
    family = "openai"
    endpoint = "/v1/chat/completions"

    def __init__(self, provider: Provider) -> None:
        from app.llm.providers.openai import OpenAIProvider

        if not isinstance(provider, OpenAIProvider):  # pragma: no cover - wiring error
            raise TypeError(provider)
        self.provider = provider
        self.label = str(provider.spec)
        self._client = _client(provider)
        self._failed: dict[str, str] = {}  # batch id -> the API's validation errors

    async def _sdk(self, call: Any) -> Any:
        response, _ = await sdk_call(
            call, sdk=self.provider._sdk, label=self.label, secret=self.provider._secret
        )
        return response

    async def submit(self, items: Sequence[BatchItem]) -> str:
        lines = [
            json.dumps(
                {
                    "custom_id": it.custom_id,
                    "method": "POST",
                    "url": self.endpoint,
                    "body": self.provider.payload(
                        it.request, model=it.model, base_url=self.provider.spec.base_url
                    ),
                },
                ensure_ascii=False,
            )
            for it in items
        ]
        blob = ("\n".join(lines) + "\n").encode("utf-8")
        uploaded = await self._sdk(
            lambda: self._client.files.create(
                file=("batch.jsonl", blob, "application/jsonl"), purpose="batch"
            )
        )
        batch = await self._sdk(
            lambda: self._client.batches.create(
                input_file_id=uploaded.id, endpoint=self.endpoint, completion_window="24h"
            )
        )
        return str(batch.id)

    async def status(self, batch_id: str) -> BatchStatus:
        b = await self._sdk(lambda: self._client.batches.retrieve(batch_id))
        rc = b.request_counts
        counts = {k: int(getattr(rc, k, 0) or 0) for k in ("total", "completed", "failed")}
        if b.status == "failed" and b.errors is not None:
            self._failed[batch_id] = "; ".join(
                f"{e.code}: {e.message}" for e in (b.errors.data or [])
            )[:300]
        return BatchStatus(ended=b.status in _OPENAI_FINAL, state=b.status, counts=counts)

    async def _lines(self, file_id: str | None) -> list[dict[str, Any]]:
        if not file_id:
            return []
        content = await self._sdk(lambda: self._client.files.content(file_id))
        rows = []
        for line in content.text.splitlines():
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    continue  # a cut line: its request gets "no result" below
        return rows

    async def results(self, batch_id: str) -> dict[str, Completion | ProviderError]:
        b = await self._sdk(lambda: self._client.batches.retrieve(batch_id))
        out: dict[str, Completion | ProviderError] = {}
        for row in await self._lines(b.output_file_id) + await self._lines(b.error_file_id):
            cid = row.get("custom_id")
            if not isinstance(cid, str):
                continue
            response = row.get("response") or {}
            error = row.get("error")
            if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
                try:
                    out[cid] = _openai_completion(response["body"], response.get("request_id"))
                except (KeyError, TypeError, ValueError, IndexError) as exc:
                    out[cid] = item_error(self.label, cid, "malformed", str(exc))
            else:
                code = (error or {}).get("code") or f"HTTP {response.get('status_code')}"
                body_err = (response.get("body") or {}).get("error") or {}
                message = (error or {}).get("message") or body_err.get("message") or "failed"
                kind = str(code)
                if isinstance(response.get("status_code"), int) and (
                    response["status_code"] >= 500 or response["status_code"] == 429
                ):
                    kind = "server_error"
                out[cid] = item_error(self.label, cid, kind, str(message))
        if b.status == "failed" and not out:
            reason = self._failed.get(batch_id, "the batch failed validation")
            raise ProviderError(
                f"{self.label}: batch {batch_id} failed: {reason}", provider=self.label
            )
        return out


def _openai_completion(body: dict[str, Any], request_id: str | None) -> Completion:
    choice = body["choices"][0]
    message = choice.get("message") or {}
    content = message.get("content")
    if not isinstance(content, str):
        raise ValueError("the reply's message has no text content")
    usage = body.get("usage") or {}
    cached = int(((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
    prompt = int(usage.get("prompt_tokens") or 0)
    return Completion(
        text=content,
        provider="openai",
        model=str(body.get("model", "")),
        finish_reason=choice.get("finish_reason"),
        usage=Usage(
            input_tokens=max(0, prompt - cached),
            output_tokens=int(usage.get("completion_tokens") or 0),
            cache_read_tokens=cached,
        ),
        request_id=request_id or body.get("id"),
    )


def api_for(provider: Provider) -> BatchAPI:
    if provider.spec.family == "anthropic":
        return AnthropicBatches(provider)
    if provider.spec.family == "openai":
        return OpenAIBatches(provider)
    raise ProviderError(f"{provider.spec}: no batch API for this provider (anthropic, openai)")
