"""``openai:<model>`` and ``openai:<model>@<base_url>``: Chat Completions over HTTP.

* The request is one ``POST {base_url}/chat/completions`` through ``httpx2`` — the transport
  the official ``openai`` SDK itself uses, with the SDK's connection limits, redirects and
  proxy settings — and the reply is read raw. The SDK is not imported for a chat call:
  this module already checks the body itself, so the SDK's ≈ 700 response models were pure
  start-up cost (≈ 0.4 s of CPU and ≈ 24 MB before the first request). The SDK is still
  what the batch API (:mod:`app.llm.batch.apis`) uses, through :meth:`OpenAIProvider.sdk`.
* Key: ``OPENAI_API_KEY``, sent as ``Authorization: Bearer``; ``OPENAI_ORG_ID`` and
  ``OPENAI_PROJECT_ID`` become the ``OpenAI-Organization`` / ``OpenAI-Project`` headers and
  ``OPENAI_BASE_URL`` moves ``openai:<model>`` off api.openai.com, as in the SDK. A server
  on 127.0.0.1 / localhost may run without a key: it then gets the placeholder
  ``sk-no-key-required``, which such servers ignore.
* No retries here: :mod:`app.llm.engine` retries. Failures map as the SDK's did
  (:func:`~app.llm.providers.base.http_error`): HTTP 408/409/429/5xx, timeouts and dropped
  connections are retryable; ``Retry-After`` and the request id are kept.
* ``Usage.input_tokens`` = ``prompt_tokens − cached_tokens``; ``cache_read_tokens`` =
  ``prompt_tokens_details.cached_tokens`` (OpenAI caches automatically, no write fee).
* Official API: ``max_completion_tokens``; a custom ``base_url`` (vLLM, llama.cpp server,
  LiteLLM) gets the widely supported ``max_tokens``.
* ``llama2`` / ``text`` chat formats: ``request.prompt_text`` is sent as one user message.
* The reply is read raw and checked field by field (:mod:`app.llm.providers.replies`): an
  HTML page, a cut body, no choices or a ``null`` message is a retryable
  :class:`~app.errors.MalformedReply`, never an ``AttributeError``.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

from app.errors import ConfigError
from app.llm.providers.base import (
    Provider,
    http_error,
    loopback,
    missing_sdk,
    prompt_messages,
    require_sdk,
)
from app.llm.providers.replies import openai_completion
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest, Completion

ENV_KEY = "OPENAI_API_KEY"
NO_KEY_PLACEHOLDER = "sk-no-key-required"
OFFICIAL_BASE_URL = "https://api.openai.com/v1"
#: the SDK's own pool limits (``openai._constants.DEFAULT_CONNECTION_LIMITS``)
MAX_CONNECTIONS, MAX_KEEPALIVE = 1000, 100


class OpenAIProvider(Provider):
    """Chat Completions over HTTP (``httpx2``, the SDK's transport). An OpenAI-compatible service is a
    subclass that sets :attr:`family`, :attr:`env_key` and :attr:`default_base_url`
    (``docs/extending/add-a-provider.md``)."""

    family = "openai"
    #: the environment variable holding the key (never a model string, a report or a log)
    env_key: ClassVar[str] = ENV_KEY
    #: the endpoint of ``<family>:<model>`` without ``@<base_url>`` (None: ``OPENAI_BASE_URL``
    #: or api.openai.com, as the SDK); ``<family>:<model>@<base_url>`` overrides it
    default_base_url: ClassVar[str | None] = None

    def __init__(self, spec: ProviderSpec) -> None:
        if spec.base_url is None and self.default_base_url is not None:
            spec = ProviderSpec(spec.family, spec.model, self.default_base_url)
        super().__init__(spec)
        key = os.environ.get(self.env_key)
        if not key:
            if not loopback(spec.base_url):
                raise ConfigError(
                    f"provider {spec}: set the environment variable {self.env_key} "
                    "(only servers on 127.0.0.1/localhost may run without a key)"
                )
            key = NO_KEY_PLACEHOLDER
        require_sdk("httpx2", str(spec))
        self._secret = key
        self._http: Any = None  # the HTTP client: made for the first request
        self._url = ""
        self._headers: dict[str, str] = {}
        self._httpx: Any = None  # the httpx2 module, once imported
        self._sdk: Any = None  # the openai SDK and its client: made for the batch API only
        self._sdk_client: Any = None

    def connect(self) -> Any:
        """The HTTP client (imported and made on first use)."""
        if self._http is not None:
            return self._http
        try:
            import httpx2
        except ImportError as exc:
            raise ConfigError(missing_sdk("httpx2", str(self.spec))) from exc
        from app import __version__

        base = self.spec.base_url or os.environ.get("OPENAI_BASE_URL") or OFFICIAL_BASE_URL
        self._url = base.rstrip("/") + "/chat/completions"
        headers = {
            "Authorization": f"Bearer {self._secret}",
            "Accept": "application/json",
            "User-Agent": f"rag-starter/{__version__}",
        }
        for header, env in (
            ("OpenAI-Organization", "OPENAI_ORG_ID"),
            ("OpenAI-Project", "OPENAI_PROJECT_ID"),
        ):
            if value := os.environ.get(env):
                headers[header] = value
        self._headers = headers
        self._http = httpx2.AsyncClient(
            limits=httpx2.Limits(
                max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE
            ),
            follow_redirects=True,
        )
        self._httpx = httpx2
        return self._http

    def sdk(self) -> Any:
        """The ``openai`` SDK's client, for the batch API (files, batches); made on first use."""
        if self._sdk_client is not None:
            return self._sdk_client
        try:
            import openai
        except ImportError as exc:
            raise ConfigError(missing_sdk("openai", str(self.spec))) from exc
        self._sdk_client = openai.AsyncOpenAI(
            api_key=self._secret,
            base_url=self.spec.base_url,
            max_retries=0,
            http_client=openai.DefaultAsyncHttpxClient(),
        )
        self._sdk = openai
        return self._sdk_client

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
        if self._sdk_client is not None:
            await self._sdk_client.close()

    @classmethod
    def payload(cls, request: ChatRequest, *, model: str, base_url: str | None) -> dict[str, Any]:
        """The Chat Completions body for ``request`` (the one encoder of this API: what
        ``generate`` sends and ``rag prompts render --json`` prints)."""
        system, turns = prompt_messages(request)
        messages: list[dict[str, str]] = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.extend({"role": role, "content": content} for role, content in turns)
        params: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": request.temperature,
        }
        # the official API takes max_completion_tokens; other servers the common max_tokens
        official = (base_url or cls.default_base_url) is None
        tokens_key = "max_completion_tokens" if official else "max_tokens"
        params[tokens_key] = request.max_tokens
        if request.stop:
            params["stop"] = list(request.stop)
        if request.response_format == "json":
            params["response_format"] = {"type": "json_object"}
        return params

    async def generate(self, request: ChatRequest, *, model: str, timeout_s: float) -> Completion:
        http = self.connect()
        label = str(self.spec)
        params = self.payload(request, model=model, base_url=self.spec.base_url)
        httpx2 = self._httpx
        try:
            response = await http.post(
                self._url, json=params, headers=self._headers, timeout=httpx2.Timeout(timeout_s)
            )
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            error = http_error(label, self._secret, transport=exc)
        else:
            if response.is_success:
                return openai_completion(response, label=label, model=model)
            error = http_error(label, self._secret, response=response)
        raise error  # outside the except: the transport error is not kept as its context
