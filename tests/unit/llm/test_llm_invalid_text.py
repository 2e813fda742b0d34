"""A reply holding a lone surrogate (``"content": "…[1] \\ud800"``, valid JSON that real
models emit when they break a surrogate pair) is never a crash.

It used to be: the cache's ``put`` raised ``UnicodeEncodeError``, the run died without a
report, and ``--resume`` died the same way (temperature 0 returns the same reply). Now the
engine replaces each lone surrogate by U+FFFD at the provider boundary, counts it on the
completion (``repaired``) and notes the call; a reply that is nothing but such characters is
a retryable :class:`~app.errors.MalformedReply`, like the other bad bodies.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.errors import MalformedReply
from app.llm.cache import ResponseCache, encode_completion
from app.llm.engine import Engine, invalid_text
from app.llm.types import Completion
from app.wellformed import REPLACEMENT, clean_data, scrub
from tests.support.fake_llm_server import LONE_SURROGATE_REPLY, FakeLLMServer
from tests.unit.llm.helpers import chat

pytestmark = pytest.mark.usefixtures("planted_keys")

EngineFactory = Callable[..., Engine]


def test_the_rule_replaces_and_counts() -> None:
    assert scrub("年假 [1] \ud800") == ("年假 [1] \ufffd", 1)
    assert scrub("\udc80\udcff ok \ud83d") == ("\ufffd\ufffd ok \ufffd", 3)
    assert scrub("😀 is a pair, not a lone surrogate") == ("😀 is a pair, not a lone surrogate", 0)
    text = "plain"
    assert scrub(text)[0] is text  # nothing to do: the same object, no copy
    data, n = clean_data({"a\ud800": ["x", ("\udfff",)], "b": 1})
    assert data == {"a\ufffd": ["x", ("\ufffd",)], "b": 1} and n == 2


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_lone_surrogate_reply_is_stored_replaced_and_counted(
    kind: str, fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    assert "\ud800" in LONE_SURROGATE_REPLY
    fake_llm_server.script(LONE_SURROGATE_REPLY)
    provider = (
        f"openai:gpt-4o-mini@{fake_llm_server.openai_base_url}"
        if kind == "openai"
        else "anthropic:claude-sonnet-4-6"
    )
    engine = engine_factory(cache=True)
    with invalid_text() as notes:
        completion = await engine.generate(provider, chat())
    expected = LONE_SURROGATE_REPLY.replace("\ud800", REPLACEMENT)
    assert completion.text == expected
    assert completion.repaired == 1
    assert engine.stats.invalid_text_replies == 1 and engine.stats.errors == 0
    assert len(notes) == 1 and "request id req_1" in notes[0] and "1 lone surrogate" in notes[0]
    # stored (the put no longer raises) and served again with the count kept: a resumed run
    # says the same about that call
    again = engine_factory(cache=True)
    with invalid_text() as notes:
        hit = await again.generate(provider, chat())
    assert hit.cached and hit.text == expected and hit.repaired == 1
    assert fake_llm_server.requests == 1
    assert len(notes) == 1 and "from the cache" in notes[0]


async def test_a_reply_of_nothing_but_lone_surrogates_is_a_malformed_reply(
    fake_llm_server: FakeLLMServer, engine_factory: EngineFactory
) -> None:
    fake_llm_server.script("\ud800\ud800", " \udfff ", "recovered")
    provider = f"openai:gpt-4o-mini@{fake_llm_server.openai_base_url}"
    engine = engine_factory(cache=True, max_attempts=1)
    with pytest.raises(MalformedReply) as info:
        await engine.generate(provider, chat())
    assert "lone surrogate" in str(info.value) and info.value.request_id == "req_1"
    assert info.value.retryable and engine.stats.malformed_replies == 1
    retried = engine_factory(cache=True)  # retried like the other bad bodies
    completion = await retried.generate(provider, chat())
    assert completion.text == "recovered" and completion.repaired == 0
    assert retried.stats.retries == 1


def test_a_clean_completion_is_stored_as_before() -> None:
    """``repaired`` is written only when not 0: the entries (and the warm cache's digests
    of them) written before it existed stay valid."""
    blob = encode_completion(Completion("hi", "openai", "m"))
    assert '"repaired"' not in blob
    blob = encode_completion(Completion("h\ufffd", "openai", "m", repaired=1))
    assert '"repaired":1' in blob


def test_the_cache_store_never_fails_on_invalid_text(tmp_path: object) -> None:
    """The writer's side of the rule: a completion that bypassed the engine still stores."""
    from pathlib import Path

    from app.llm.providers.families import parse_provider

    assert isinstance(tmp_path, Path)
    cache = ResponseCache(tmp_path / "c.sqlite3")
    spec = parse_provider("openai:gpt-4o-mini")
    cache.put("k", Completion("a\ud800", "openai", "m"), spec=spec, request=chat())
    got = cache.get("k")
    assert got is not None and got.text == "a\ufffd"
    cache.close()
