"""The one abstract call every provider implements, and helpers the SDK adapters share.

A provider turns a :class:`~app.llm.types.ChatRequest` into a
:class:`~app.llm.types.Completion` with one attempt and no retries, no cache and no
concurrency control: that middleware lives once, in :mod:`app.llm.engine`. A failed
attempt raises :class:`~app.errors.ProviderError` with ``retryable`` set only for
429 / 5xx / timeouts / connection resets / unusable 200 replies, and ``retry_after`` from
the server's headers.
"""

from __future__ import annotations

import email.utils
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any, ClassVar

from app.errors import ConfigError, MalformedReply, ProviderError
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest, Completion
from app.redact import redact as _redact

RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class Provider(ABC):
    """One client per endpoint (family + base_url); the model comes with each call."""

    family: ClassVar[str]
    #: False for deterministic local providers: re-computing is cheaper than the cache
    #: and a cached baseline would hide a change of its rules.
    cacheable: ClassVar[bool] = True
    #: True when a completion is a pure function of the request (no sampling, no state):
    #: a judge that is asked once per metric and case, its other samples repeat that verdict.
    deterministic: ClassVar[bool] = False
    #: True: ``generate`` computes its answer in this process and returns without awaiting
    #: anything (no I/O, no sleep). The engine then runs it without a concurrency slot or a
    #: deadline when every slot is free (neither could change anything: no other task runs
    #: until it returns, and a deadline fires only at an await); one that awaits is refused.
    in_process: ClassVar[bool] = False

    def __init__(self, spec: ProviderSpec) -> None:
        self.spec = spec

    def __repr__(self) -> str:  # never shows a key: the spec holds none
        return f"{type(self).__name__}({self.spec.endpoint!r})"

    @classmethod
    def payload(cls, request: ChatRequest, *, model: str, base_url: str | None) -> dict[str, Any]:
        """The request body this provider sends for ``request``; ``generate`` must send
        exactly this (``rag prompts render --json`` prints it). An in-process provider
        receives the :class:`ChatRequest` itself, so the default is that request as data
        (what the offline baselines read: messages, variables, metadata)."""
        return {**request.cache_payload(), "model": model}

    @abstractmethod
    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        """One attempt. Raise ProviderError on failure (see the module docstring)."""

    def connect(self) -> Any:
        """Make the SDK client (if any) and return it; idempotent. The engine calls it
        before an attempt's deadline starts, so a first SDK import is not timed as the
        request (the SDK providers import their SDK here, not in the constructor)."""
        return None

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release network resources (SDK clients)."""


def missing_sdk(package: str, provider: str) -> str:
    return (
        f"provider {provider!r} needs the {package!r} package: "
        f"run `.venv/bin/pip install {package}` (or `make setup`)"
    )


def require_sdk(package: str, provider: str) -> None:
    """A :class:`~app.errors.ConfigError` now if ``package`` is not installed, without
    importing it (the SDK is imported on the first request: a run whose answers all come
    from the cache never pays its import, ≈ 0.5 s for ``openai``)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(missing_sdk(package, provider))


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(0.0, email.utils.mktime_tz(parsed) - time.time())


def redact(text: str, *secrets: str | None) -> str:
    """:func:`app.redact.redact` plus the client's own key (which may not be in the
    environment when it was passed another way)."""
    return _redact(text, *secrets)


def prompt_messages(request: ChatRequest) -> tuple[str | None, list[tuple[str, str]]]:
    """The (system, [(role, content)]) a chat API receives.

    Single-string chat formats (``llama2``, ``text``) carry their rendering in
    ``request.prompt_text``; chat APIs receive it as one user message and no system
    parameter (the system prompt is already inside the rendered text).
    """
    if request.prompt_text is not None and request.chat_format in ("llama2", "text"):
        return None, [("user", request.prompt_text)]
    return request.system, [(m.role, m.content) for m in request.messages]


def sdk_error(exc: BaseException, sdk: Any, provider: str, secret: str | None) -> ProviderError:
    """Map an exception of a Stainless-generated SDK (openai, anthropic) to ProviderError.

    Retryable: HTTP 408/409/429/5xx, timeouts, connection errors (resets, drops).
    Not retryable: other statuses (400, 401, …), anything else. An unparseable 200 body is
    retryable (:class:`~app.errors.MalformedReply`): a proxy's page or a cut body is transient.
    """
    status: int | None = None
    request_id: str | None = None
    retry_after: float | None = None
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is not None:
        request_id = headers.get("request-id") or headers.get("x-request-id")
        retry_after = parse_retry_after(headers)
    request_id = getattr(exc, "request_id", None) or request_id
    if isinstance(exc, sdk.APITimeoutError):
        kind, retryable = "timed out", True
    elif isinstance(exc, sdk.APIConnectionError):
        kind, retryable = "connection failed", True
    elif isinstance(exc, sdk.APIStatusError):
        status = int(exc.status_code)
        kind, retryable = f"HTTP {status}", status in RETRYABLE_STATUS
    elif isinstance(exc, sdk.APIResponseValidationError | ValueError):
        kind, retryable = "malformed response body", True  # transient, like MalformedReply
    else:
        kind, retryable = type(exc).__name__, False
    return _failure(
        provider, kind, redact(str(exc), secret), request_id, status, retryable, retry_after
    )


def _failure(
    provider: str,
    kind: str,
    detail: str,
    request_id: str | None,
    status: int | None,
    retryable: bool,
    retry_after: float | None,
) -> ProviderError:
    """The one shape of a failed call's error: ``<provider>: <kind> (request id …): <detail>``
    (the detail already redacted, cut to 500 characters)."""
    rid = f" (request id {request_id})" if request_id else ""
    return ProviderError(
        f"{provider}: {kind}{rid}: {detail[:500]}",
        provider=provider,
        request_id=request_id,
        status=status,
        retryable=retryable,
        retry_after=retry_after,
    )


def http_error(
    provider: str,
    secret: str | None,
    *,
    response: Any = None,
    transport: BaseException | None = None,
) -> ProviderError:
    """A failed plain-HTTP call (no SDK) as :class:`ProviderError`, classified as
    :func:`sdk_error` classifies the SDKs' exceptions: a non-2xx ``response`` is
    ``HTTP <status>``, retryable for 408/409/429/5xx, with its ``Retry-After`` and request id
    and the start of its body (the key redacted); a ``transport`` error (an
    ``httpx``/``httpx2`` exception) is "timed out" or "connection failed", retryable (an
    invalid URL is not)."""
    status: int | None = None
    request_id: str | None = None
    retry_after: float | None = None
    if response is not None:
        status = int(response.status_code)
        headers = response.headers
        request_id = headers.get("x-request-id") or headers.get("request-id") or None
        retry_after = parse_retry_after(headers)
        kind, retryable = f"HTTP {status}", status in RETRYABLE_STATUS
        body = bytes(response.content[:2000]).decode("utf-8", errors="replace")
        detail = " ".join(body.split()) or "(empty body)"
    else:
        name = type(transport).__name__
        # the SDKs: a timeout is APITimeoutError, any other failure to get a reply
        # APIConnectionError — both retryable; a malformed URL is not a passing fault
        if isinstance(transport, TimeoutError) or "Timeout" in name:
            kind, retryable = "timed out", True
        elif name == "InvalidURL":
            kind, retryable = "invalid URL", False
        else:
            kind, retryable = "connection failed", True
        detail = f"{name}: {transport}" if str(transport) else name
    return _failure(
        provider, kind, redact(detail, secret), request_id, status, retryable, retry_after
    )


def loopback(base_url: str | None) -> bool:
    """True for a server on this machine (which may run without an API key)."""
    if not base_url:
        return False
    from urllib.parse import urlsplit

    return (urlsplit(base_url).hostname or "") in {"127.0.0.1", "localhost", "::1"}


_LAST_REQUEST_ID: ContextVar[str | None] = ContextVar("llm_last_request_id", default=None)


def request_id_hook(header: str) -> Callable[[Any], Awaitable[None]]:
    """An httpx response hook that remembers the request id of the task's last response
    (the SDKs' plain calls lose it when a 200 body does not parse)."""

    async def hook(response: Any) -> None:
        _LAST_REQUEST_ID.set(response.headers.get(header))

    return hook


async def sdk_call(
    call: Callable[[], Awaitable[Any]],
    *,
    sdk: Any,
    label: str,
    secret: str | None,
) -> tuple[Any, str | None]:
    """Run one SDK call; return (parsed response, request id).

    The request id comes from the response (``_request_id``, set by both SDKs) or from
    :func:`request_id_hook`. Failures become :class:`ProviderError` raised *outside* the
    ``except`` block, so the SDK exception (whose message may quote a server's echo of
    the credentials) is not kept as ``__context__``.
    """
    _LAST_REQUEST_ID.set(None)
    try:
        response = await call()
        return response, getattr(response, "_request_id", None) or _LAST_REQUEST_ID.get()
    except sdk.APIError as exc:  # the base of every SDK error (openai and anthropic)
        error = sdk_error(exc, sdk, label, secret)
    except ValueError as exc:  # an unparseable body
        request_id = _LAST_REQUEST_ID.get()
        error = MalformedReply(
            f"{label}: malformed response body (request id {request_id}): "
            + redact(str(exc), secret)[:300],
            provider=label,
            request_id=request_id,
        )
    error.request_id = error.request_id or _LAST_REQUEST_ID.get()
    raise error
