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
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.errors import MalformedReply, ProviderError
from app.llm.providers.base import Provider, sdk_call
from app.llm.providers.replies import anthropic_completion, batch_reply, openai_completion
from app.llm.types import ChatRequest, Completion
from app.redact import redact

log = logging.getLogger(__name__)

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
    client = provider.connect()  # the SDK providers make it on first use
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
        try:  # the lines as they came, read like a live reply (not the SDK's lenient types)
            lines = [line async for line in stream.http_response.aiter_lines()]
        finally:
            await stream.close()
        for row in json_rows(lines, self.label):
            cid, result = row.get("custom_id"), row.get("result")
            if not isinstance(cid, str):
                continue
            result = result if isinstance(result, Mapping) else {}
            kind = result.get("type")
            if kind == "succeeded":
                out[cid] = _parsed(anthropic_completion, self.label, cid, result.get("message"))
            elif kind == "errored":
                err = result.get("error")
                err = err.get("error") if isinstance(err, Mapping) else None
                err = err if isinstance(err, Mapping) else {}
                out[cid] = item_error(
                    self.label,
                    cid,
                    str(err.get("type") or "error"),
                    str(err.get("message") or "errored"),
                )
            elif kind in ("canceled", "expired"):
                out[cid] = item_error(self.label, cid, kind, "not processed before the batch ended")
            else:
                out[cid] = MalformedReply(
                    f"{self.label}: batch request {cid[:12]}…: result type {kind!r} is none of "
                    "succeeded, errored, canceled, expired",
                    provider=self.label,
                )
        return out


def json_rows(lines: Sequence[str], label: str) -> list[dict[str, Any]]:
    """The JSON objects of a batch's result lines. A line that is not one (a cut line, an
    HTML page) names no request: it is logged, and its request gets "no result" (retried)."""
    rows: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            row = None
        if isinstance(row, dict):
            rows.append(row)
        else:
            log.warning(
                "%s: a batch result line is not a JSON object: %r", label, redact(line[:120])
            )
    return rows


def _parsed(
    parse: Callable[..., Completion],
    label: str,
    custom_id: str,
    body: object,
    request_id: str | None = None,
) -> Completion | ProviderError:
    """One batch result's reply body through the live replies' parser: a Completion, or the
    same :class:`~app.errors.MalformedReply` a malformed live reply is."""
    model = body.get("model") if isinstance(body, Mapping) else None
    try:
        return parse(
            batch_reply(body),
            label=f"{label} batch request {custom_id[:12]}…",
            model=model if isinstance(model, str) else "",
            request_id=request_id,
        )
    except MalformedReply as exc:
        exc.provider = label
        return exc


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
        self._client = provider.sdk()  # the batch API goes through the SDK
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
        return json_rows(content.text.splitlines(), self.label)

    async def results(self, batch_id: str) -> dict[str, Completion | ProviderError]:
        b = await self._sdk(lambda: self._client.batches.retrieve(batch_id))
        out: dict[str, Completion | ProviderError] = {}
        for row in await self._lines(b.output_file_id) + await self._lines(b.error_file_id):
            cid = row.get("custom_id")
            if not isinstance(cid, str):
                continue
            response = row.get("response")
            response = response if isinstance(response, Mapping) else {}
            error = row.get("error")
            error = error if isinstance(error, Mapping) else {}
            status, body = response.get("status_code"), response.get("body")
            if status == 200:
                rid = response.get("request_id")
                out[cid] = _parsed(
                    openai_completion, self.label, cid, body, rid if isinstance(rid, str) else None
                )
                continue
            body_err = body.get("error") if isinstance(body, Mapping) else None
            body_err = body_err if isinstance(body_err, Mapping) else {}
            code = error.get("code") or f"HTTP {status}"
            message = error.get("message") or body_err.get("message") or "failed"
            kind = str(code)
            if isinstance(status, int) and (status >= 500 or status == 429):
                kind = "server_error"
            out[cid] = item_error(self.label, cid, kind, str(message))
        if b.status == "failed" and not out:
            reason = self._failed.get(batch_id, "the batch failed validation")
            raise ProviderError(
                f"{self.label}: batch {batch_id} failed: {reason}", provider=self.label
            )
        return out


def api_for(provider: Provider) -> BatchAPI:
    if provider.spec.family == "anthropic":
        return AnthropicBatches(provider)
    if provider.spec.family == "openai":
        return OpenAIBatches(provider)
    raise ProviderError(f"{provider.spec}: no batch API for this provider (anthropic, openai)")
