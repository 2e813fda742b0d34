"""The response side of the SDK providers: a 200 reply becomes a Completion or a typed error.

The SDKs parse leniently: a ``200`` whose body is an HTML page comes back as a ``str``, a
``null`` message as ``None``, and the provider then fails with an ``AttributeError`` far from
the cause (issue 12: one such reply killed a whole run). So the providers take the raw
HTTP reply (``with_raw_response``) and read it here, checking every field they use:

* the content type is JSON (a missing one is tolerated), the body is not empty, parses,
  and is a JSON object;
* an ``{"error": …}`` object (OpenAI-compatible proxies) / ``{"type": "error"}``
  (Anthropic) is an error, not an answer;
* OpenAI: ``choices`` is a non-empty list whose first item has a ``message`` object with a
  string ``content`` (a list of text parts or a ``refusal`` string also count);
  Anthropic: ``content`` is a list with at least one text block whose ``text`` is a string;
* ``usage`` may be missing (0 tokens), but a present token count must be an integer.

A provider's batch API returns the same reply bodies inside its result lines: read them here
too (:func:`batch_reply`), so a malformed batch result is the same error as a malformed live
reply.

Anything else raises :class:`~app.errors.MalformedReply` (a retryable
:class:`~app.errors.ProviderError`, status 200) naming the provider, the request id, what
was wrong and the start of the body (redacted).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from app.errors import MalformedReply
from app.llm.types import Completion, Usage
from app.redact import redact

_SNIPPET = 120
#: msgspec reads a reply body ~4x faster than ``json.loads``; a body it refuses (a UTF-8 BOM,
#: UTF-16/32, ``NaN``, a number beyond a float, a lone surrogate, or not JSON at all) goes to
#: ``json.loads``, which decides as before: the same data, the same errors
_DECODER = msgspec.json.Decoder()


@dataclass(frozen=True)
class BatchReply:
    """One result of a batch API, standing where a live call's HTTP reply would: its body
    (re-encoded JSON, or the text that came: an HTML page stays an HTML page)."""

    content: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


def batch_reply(body: object) -> BatchReply:
    """A batch result line's reply body (parsed JSON, a string, or null) as a reply."""
    if body is None:
        return BatchReply(b"")
    if isinstance(body, str):
        return BatchReply(body.encode("utf-8"))
    return BatchReply(json.dumps(body, ensure_ascii=False).encode("utf-8"))


class _Reply:
    """One raw HTTP reply being read: its label for messages and its parsed JSON."""

    def __init__(self, response: Any, label: str, request_id: str | None) -> None:
        self.label = label
        headers = getattr(response, "headers", None) or {}
        self.request_id = (
            request_id or headers.get("x-request-id") or headers.get("request-id") or None
        )
        self.content_type = str(headers.get("content-type") or "")
        self.body: bytes = bytes(getattr(response, "content", b"") or b"")

    def fail(self, what: str) -> MalformedReply:
        text = self.body[: _SNIPPET * 4].decode("utf-8", errors="replace")
        snippet = redact(" ".join(text.split()))[:_SNIPPET]
        rid = f" (request id {self.request_id})" if self.request_id else ""
        return MalformedReply(
            f"{self.label}: unusable 200 reply{rid}: {what}"
            + (f"; body starts {snippet!r}" if snippet else ""),
            provider=self.label,
            request_id=self.request_id,
        )

    def json_object(self) -> dict[str, Any]:
        media = self.content_type.split(";")[0].strip().lower()
        if media and not media.endswith("json"):
            raise self.fail(f"content type {media} is not JSON")
        if not self.body.strip():
            raise self.fail("empty body")
        try:
            data = _DECODER.decode(self.body)
        except (msgspec.MsgspecError, RecursionError):
            try:
                data = json.loads(self.body)
            except (ValueError, RecursionError) as exc:
                raise self.fail(f"body is not JSON ({type(exc).__name__})") from None
        if not isinstance(data, dict):
            raise self.fail(f"body is not a JSON object but {type(data).__name__}")
        return data


def _tokens(reply: _Reply, usage: Any, *names: str) -> list[int]:
    if usage is None:
        return [0] * len(names)
    if not isinstance(usage, Mapping):
        raise reply.fail(f"usage is {type(usage).__name__}, not an object")
    out: list[int] = []
    for name in names:
        value = usage.get(name)
        if value is None:
            out.append(0)
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out.append(value)
        else:
            raise reply.fail(f"usage.{name} is {value!r}, not a token count")
    return out


def _error_text(data: Mapping[str, Any]) -> str | None:
    error = data.get("error")
    if data.get("type") != "error" and error is None:
        return None
    if isinstance(error, Mapping):
        kind, message = error.get("type") or error.get("code"), error.get("message")
        return f"the body is an error object ({kind}: {message})"
    return f"the body is an error object ({error!r})"


def _text_parts(reply: _Reply, content: Any, where: str) -> str | None:
    """Text of a content given as a list of ``{"type": "text", "text": …}`` parts."""
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for part in content:
        if not isinstance(part, Mapping) or part.get("type") != "text":
            continue
        text = part.get("text")
        if not isinstance(text, str):
            raise reply.fail(f"{where}: a text block is not a string ({text!r})")
        texts.append(text)
    return "".join(texts) if texts else None


def openai_completion(
    response: Any, *, label: str, model: str, request_id: str | None = None
) -> Completion:
    """A Chat Completions reply → :class:`Completion`, or :class:`MalformedReply`."""
    reply = _Reply(response, label, request_id)
    data = reply.json_object()
    if (error := _error_text(data)) is not None:
        raise reply.fail(error)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise reply.fail(f"no choices (choices is {choices!r})")
    choice = choices[0]
    if not isinstance(choice, Mapping):
        raise reply.fail(f"choices[0] is {type(choice).__name__}, not an object")
    message = choice.get("message")
    if message is None:
        raise reply.fail("choices[0].message is null")
    if not isinstance(message, Mapping):
        raise reply.fail(f"choices[0].message is {type(message).__name__}, not an object")
    content = message.get("content")
    if isinstance(content, list):
        content = _text_parts(reply, content, "choices[0].message.content")
    if not isinstance(content, str):
        refusal = message.get("refusal")
        if not isinstance(refusal, str):
            raise reply.fail(f"choices[0].message has no text content (content is {content!r})")
        content = refusal
    finish = choice.get("finish_reason")
    usage = data.get("usage")
    prompt, completion_tokens = _tokens(reply, usage, "prompt_tokens", "completion_tokens")
    cached = 0
    if isinstance(usage, Mapping):
        details = usage.get("prompt_tokens_details")
        if isinstance(details, Mapping):
            (cached,) = _tokens(reply, details, "cached_tokens")
    rid = reply.request_id or (data.get("id") if isinstance(data.get("id"), str) else None)
    return Completion(
        text=content,
        provider="openai",
        model=model,
        finish_reason=finish if isinstance(finish, str) else None,
        usage=Usage(
            input_tokens=max(0, prompt - cached),
            output_tokens=completion_tokens,
            cache_read_tokens=cached,
        ),
        request_id=rid,
    )


def anthropic_completion(
    response: Any, *, label: str, model: str, request_id: str | None = None
) -> Completion:
    """A Messages API reply → :class:`Completion`, or :class:`MalformedReply`."""
    reply = _Reply(response, label, request_id)
    data = reply.json_object()
    if (error := _error_text(data)) is not None:
        raise reply.fail(error)
    content = data.get("content")
    if not isinstance(content, list):
        raise reply.fail(f"content is {content!r}, not a list of blocks")
    text = _text_parts(reply, content, "content")
    if text is None:
        kinds = [b.get("type") if isinstance(b, Mapping) else type(b).__name__ for b in content]
        raise reply.fail(f"no text content (blocks: {kinds})")
    stop = data.get("stop_reason")
    tokens = _tokens(
        reply,
        data.get("usage"),
        "input_tokens",
        "output_tokens",
        "cache_read_input_tokens",
        "cache_creation_input_tokens",
    )
    rid = reply.request_id or (data.get("id") if isinstance(data.get("id"), str) else None)
    return Completion(
        text=text,
        provider="anthropic",
        model=model,
        finish_reason=stop if isinstance(stop, str) else None,
        usage=Usage(
            input_tokens=tokens[0],
            output_tokens=tokens[1],
            cache_read_tokens=tokens[2],
            cache_write_tokens=tokens[3],
        ),
        request_id=rid,
    )
