"""``anthropic:<model>`` through the official ``anthropic`` SDK (Messages API).

* Key: ``ANTHROPIC_API_KEY`` (``ANTHROPIC_BASE_URL`` is honoured by the SDK).
* The SDK's own retries are off (``max_retries=0``): :mod:`app.llm.engine` retries.
* The system prompt is sent as one text block with ``cache_control: ephemeral`` (prompt
  caching; ``metadata["system_cache_control"] = "none"`` sends it as a plain string); usage records ``cache_creation_input_tokens`` as ``cache_write_tokens`` and
  ``cache_read_input_tokens`` as ``cache_read_tokens``.
* ``llama2`` / ``text`` chat formats: ``request.prompt_text`` is sent as one user message.
* ``response_format="json"`` has no API switch here; the judge prompts ask for JSON.
* ``temperature`` is not sent: SDK 2.x speaks API version 2026-10-21, which removed the
  sampling parameters (temperature, top_p, top_k) and answers 400 to any of them. The
  request's temperature still takes part in the cache key.
* The reply is read raw and checked field by field (:mod:`app.llm.providers.replies`): no
  text block, a ``null`` text or an error object is a retryable
  :class:`~app.errors.MalformedReply`.
"""

from __future__ import annotations

import os
from typing import Any

from app.errors import ConfigError
from app.llm.providers.base import (
    Provider,
    missing_sdk,
    prompt_messages,
    request_id_hook,
    require_sdk,
    sdk_call,
)
from app.llm.providers.replies import anthropic_completion
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest, Completion

ENV_KEY = "ANTHROPIC_API_KEY"


class AnthropicProvider(Provider):
    family = "anthropic"

    def __init__(self, spec: ProviderSpec) -> None:
        super().__init__(spec)
        key = os.environ.get(ENV_KEY)
        if not key:
            raise ConfigError(f"provider {spec}: set the environment variable {ENV_KEY}")
        require_sdk("anthropic", str(spec))
        self._secret = key
        self._sdk: Any = None  # the SDK and its client: made for the first request
        self._client: Any = None
        self._create: Any = None

    def connect(self) -> Any:
        """The SDK client (imported and made on first use)."""
        if self._client is not None:
            return self._client
        try:
            import anthropic
        except ImportError as exc:
            raise ConfigError(missing_sdk("anthropic", str(self.spec))) from exc
        http = anthropic.DefaultAsyncHttpxClient(
            event_hooks={"response": [request_id_hook("request-id")]}
        )
        self._client = anthropic.AsyncAnthropic(
            api_key=self._secret, max_retries=0, http_client=http
        )
        # raw: the body is checked here, not trusted to the SDK's lenient parse
        self._create = self._client.messages.with_raw_response.create
        self._sdk = anthropic
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()

    @classmethod
    def payload(cls, request: ChatRequest, *, model: str, base_url: str | None) -> dict[str, Any]:
        """The Messages API body for ``request`` (the one encoder of this API: what
        ``generate`` sends and ``rag prompts render --json`` prints). ``base_url`` is not
        part of the body (the SDK reads ``ANTHROPIC_BASE_URL``)."""
        system, turns = prompt_messages(request)
        params: dict[str, Any] = {
            "model": model,
            "max_tokens": request.max_tokens,
            "messages": [{"role": role, "content": content} for role, content in turns],
        }
        if system and request.metadata.get("system_cache_control") == "none":
            params["system"] = system
        elif system:
            params["system"] = [
                {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
            ]
        if request.stop:
            params["stop_sequences"] = list(request.stop)
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
        return anthropic_completion(
            raw.http_response, label=label, model=model, request_id=request_id
        )
