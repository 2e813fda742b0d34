"""``local:<model>``: the local model tier (``make local-model``) through the OpenAI provider.

``local:smollm2`` is ``openai:smollm2@$RAG_LOCAL_MODEL_URL`` (default
``http://127.0.0.1:8012/v1``, the port ``make local-model`` serves on): the same SDK path
and wire body, no key (loopback), and its own name in reports so a local model's numbers are
never mistaken for a hosted one's. A request with a ``json_schema`` (the judge prompts) is
sent as ``response_format: {"type": "json_schema", …}``: ``llm-server.mjs`` turns the schema
into a llama.cpp grammar, so a small model's reply is the JSON asked for or is cut by
``max_tokens`` — never prose or a ``1.1.1.1…`` loop. Registered in :mod:`app.llm.providers` with
``register_provider``. See :mod:`app.llm.local_server`.
"""

from __future__ import annotations

# app.llm.local_server (httpx) is imported only when a local provider is used: registering
# the family must not load anything an offline run does not need
from typing import Any

from app.llm.providers.openai import OpenAIProvider
from app.llm.spec import ProviderSpec
from app.llm.types import ChatRequest


class LocalProvider(OpenAIProvider):
    family = "local"

    def __init__(self, spec: ProviderSpec) -> None:
        from app.llm.local_server import default_url

        super().__init__(ProviderSpec(family="openai", model=spec.model, base_url=default_url()))

    @classmethod
    def payload(cls, request: ChatRequest, *, model: str, base_url: str | None) -> dict[str, Any]:
        from app.llm.local_server import default_url

        params = super().payload(request, model=model, base_url=base_url or default_url())
        if request.response_format == "json" and request.json_schema is not None:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "strict": True, "schema": request.json_schema},
            }
        return params
