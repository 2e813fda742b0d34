"""``openai:<model>`` and ``openai:<model>@<base_url>`` through the official ``openai`` SDK.

* Key: ``OPENAI_API_KEY``. A server on 127.0.0.1 / localhost may run without one: the SDK
  then sends the placeholder ``sk-no-key-required``, which such servers ignore.
* The SDK's own retries are off (``max_retries=0``): :mod:`app.llm.engine` retries.
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
    loopback,
    missing_sdk,
    prompt_messages,
    request_id_hook,
    require_sdk,
    sdk_call,
)
from app.llm.providers.replies import openai_completion
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest, Completion

ENV_KEY = "OPENAI_API_KEY"
NO_KEY_PLACEHOLDER = "sk-no-key-required"


class OpenAIProvider(Provider):
    """Chat Completions through the ``openai`` SDK. An OpenAI-compatible service is a
    subclass that sets :attr:`family`, :attr:`env_key` and :attr:`default_base_url`
    (``docs/extending/add-a-provider.md``)."""

    family = "openai"
    #: the environment variable holding the key (never a model string, a report or a log)
    env_key: ClassVar[str] = ENV_KEY
    #: the endpoint of ``<family>:<model>`` without ``@<base_url>`` (None: the SDK's own,
    #: api.openai.com); ``<family>:<model>@<base_url>`` overrides it
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
        require_sdk("openai", str(spec))
        self._secret = key
        self._sdk: Any = None  # the SDK and its client: made for the first request
        self._client: Any = None
        self._create: Any = None

    def connect(self) -> Any:
        """The SDK client (imported and made on first use)."""
        if self._client is not None:
            return self._client
        try:
            import openai
        except ImportError as exc:
            raise ConfigError(missing_sdk("openai", str(self.spec))) from exc
        http = openai.DefaultAsyncHttpxClient(
            event_hooks={"response": [request_id_hook("x-request-id")]}
        )
        self._client = openai.AsyncOpenAI(
            api_key=self._secret, base_url=self.spec.base_url, max_retries=0, http_client=http
        )
        # raw: the body is checked here, not trusted to the SDK's lenient parse
        self._create = self._client.chat.completions.with_raw_response.create
        self._sdk = openai
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

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
        if self._sdk is None:
            self.connect()
        label = str(self.spec)
        params = self.payload(request, model=model, base_url=self.spec.base_url)
        raw, request_id = await sdk_call(
            lambda: self._create(**params, timeout=timeout_s),
            sdk=self._sdk,
            label=label,
            secret=self._secret,
        )
        return openai_completion(raw.http_response, label=label, model=model, request_id=request_id)
