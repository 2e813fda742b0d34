"""Reading a raw reply body: the fast decoder must read every body as ``json.loads`` does.

``app.llm.providers.replies`` decodes a 200 body with msgspec and hands a body msgspec
refuses to ``json.loads``. The bodies below are ones msgspec refuses and the json module
reads (a UTF-8 byte-order mark, UTF-16, a lone surrogate, a number beyond a float): each
must still become the completion a reader of the JSON text expects (written out by hand
here), and a body neither reads must stay the same "not JSON" error.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import msgspec
import pytest

from app.errors import MalformedReply
from app.llm.providers.replies import anthropic_completion, openai_completion


def _reply(body: bytes, content_type: str = "application/json") -> SimpleNamespace:
    return SimpleNamespace(headers={"content-type": content_type}, content=body)


def _openai_body(content: str, prompt: object = 7, completion: object = 3) -> str:
    return (
        '{"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"role": "assistant", '
        f'"content": {content}}}, "finish_reason": "stop"}}], '
        f'"usage": {{"prompt_tokens": {prompt}, "completion_tokens": {completion}}}}}'
    )


# (body, expected text): bodies msgspec cannot read but the json module can
FALLBACK = {
    "utf8_bom": (b"\xef\xbb\xbf" + _openai_body('"ok [1]"').encode(), "ok [1]"),
    "utf16": (_openai_body('"\\u4f60\\u597d"').encode("utf-16"), "你好"),
    "lone_surrogate": (_openai_body('"a\\ud800b"').encode(), "a\ud800b"),
}


@pytest.mark.parametrize("name", sorted(FALLBACK))
def test_a_body_only_the_json_module_reads_is_still_a_completion(name: str) -> None:
    body, text = FALLBACK[name]
    with pytest.raises(msgspec.MsgspecError):  # the case the fallback exists for
        msgspec.json.decode(body)
    got = openai_completion(_reply(body), label="openai:m", model="m")
    assert got.text == text
    assert (got.usage.input_tokens, got.usage.output_tokens) == (7, 3)
    assert got.finish_reason == "stop" and got.request_id == "chatcmpl-1"


def test_a_float_beyond_range_in_usage_is_the_same_token_count_error() -> None:
    # 1E400 is infinity to the json module: a token count that is not an int
    body = _openai_body('"ok"', prompt="1E400").encode()
    with pytest.raises(MalformedReply, match=r"usage\.prompt_tokens is inf, not a token count"):
        openai_completion(_reply(body), label="openai:m", model="m")


def test_the_fast_path_reads_what_the_json_module_reads() -> None:
    # escapes, non-ASCII, a big int id and nested parts: the fast decoder's data equals
    # json.loads's, so the completion is the one the JSON text says
    body = (
        b'{"id": "msg_\\u00e9", "type": "message", "content": [{"type": "text", "text": '
        b'"\\u6570\\u636e [1]\\n"}, {"type": "tool_use"}, {"type": "text", "text": "\\"q\\""}], '
        b'"stop_reason": "end_turn", "big": 123456789012345678901234567890, '
        b'"usage": {"input_tokens": 11, "output_tokens": 2, "cache_read_input_tokens": 5}}'
    )
    assert msgspec.json.decode(body) == json.loads(body)
    got = anthropic_completion(_reply(body), label="anthropic:m", model="m")
    assert got.text == '数据 [1]\n"q"'
    assert got.request_id == "msg_é" and got.finish_reason == "end_turn"
    assert (got.usage.input_tokens, got.usage.output_tokens, got.usage.cache_read_tokens) == (
        11,
        2,
        5,
    )


@pytest.mark.parametrize(
    "body", [b'{"choices": [', b"<html>busy</html>", b'{"a": 0001}', b'{"a": "\xff"}']
)
def test_a_body_neither_reads_is_the_not_json_error(body: bytes) -> None:
    with pytest.raises(MalformedReply, match=r"body is not JSON \((JSON|Unicode)DecodeError\)"):
        openai_completion(_reply(body), label="openai:m", model="m")
