"""app/redact.py: one filter for configured secrets, auth headers and key-shaped tokens."""

from __future__ import annotations

import base64
import logging

import pytest

from app.errors import MalformedReply, ProviderError, RuntimeFailure, UserError
from app.redact import configured_secrets, install_log_redaction, redact, redact_any

ENV = {
    "ANTHROPIC_API_KEY": "ant-key-0123456789",
    "OPENAI_API_KEY": "oai-key-0123456789",
    "LANGFUSE_SECRET_KEY": "lf-secret-0123456789",
    "LANGFUSE_PUBLIC_KEY": "lf-public-0123456789",
    "MISTRAL_API_KEY": "mistral-0123456789",
    "DB_PASSWORD": "hunter2hunter2",
    "MY_CLIENT_SECRET_VALUE": "client-secret-value-1",
    "GITHUB_TOKEN": "ghp_0123456789abcdef",
    "SHORT_API_KEY": "abc",  # too short to mask safely
    "HOME": "/root",
    "PATH": "/usr/bin:/bin",
}


def test_configured_secrets_are_every_named_and_pattern_matched_value() -> None:
    found = set(configured_secrets(ENV))
    for name in (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "LANGFUSE_SECRET_KEY",
        "LANGFUSE_PUBLIC_KEY",
        "MISTRAL_API_KEY",
        "DB_PASSWORD",
        "MY_CLIENT_SECRET_VALUE",
        "GITHUB_TOKEN",
    ):
        assert ENV[name] in found, name
    assert "abc" not in found and "/root" not in found and ENV["PATH"] not in found
    pair = base64.b64encode(b"lf-public-0123456789:lf-secret-0123456789").decode()
    assert pair in found  # what a host echoing its Basic auth header shows


@pytest.mark.parametrize("name", [k for k in ENV if k not in ("SHORT_API_KEY", "HOME", "PATH")])
def test_each_configured_secret_is_masked(name: str) -> None:
    text = f"error: upstream said {ENV[name]!r} is invalid"
    out = redact(text, environ=ENV)
    assert ENV[name] not in out
    assert out == "error: upstream said '***' is invalid"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def-123_XYZ", "Authorization: Bearer ***"),
        ("authorization: Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==", "authorization: Basic ***"),
        ("{'x-api-key': 'k-9f8e7d6c5b4a'}", "{'x-api-key': '***'}"),
        ('"api_key": "zzz-123"', '"api_key": "***"'),
        ("GET https://h/v1?api_key=abc123&x=1", "GET https://h/v1?api_key=***&x=1"),
        ("token sk-proj-abcdefghijklmnop1234 leaked", "token *** leaked"),
        ("sk-ant-api03-abcdefghijklmnopqrstuv", "***"),
        ("sk-lf-0123456789abcdef0123 and pk-lf-0123456789abcdef0123", "*** and ***"),
        ("header was Bearer 0123456789abcdefXYZ", "header was Bearer ***"),
    ],
)
def test_auth_headers_and_key_shaped_tokens_are_masked(text: str, expected: str) -> None:
    assert redact(text, environ={}) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the answer shows a basic misunderstanding of the policy",
        "set the environment variable OPENAI_API_KEY",
        "task-management is a desk-bound-activity-for-everyone",
        "历史对话概要: 张三负责华南区",
        "",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text, environ=ENV) == text


def test_extra_secrets_and_nested_records() -> None:
    assert redact("key=passed-in-key-1", "passed-in-key-1", environ={}) == "key=***"
    record = {"errors": [f"x {ENV['OPENAI_API_KEY']}"], "n": 3, "deep": {"e": "sk-" + "a" * 20}}
    import os

    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = ENV["OPENAI_API_KEY"]
    try:
        assert redact_any(record) == {"errors": ["x ***"], "n": 3, "deep": {"e": "***"}}
    finally:
        if old is None:
            del os.environ["OPENAI_API_KEY"]
        else:
            os.environ["OPENAI_API_KEY"] = old


def test_every_rag_error_message_is_redacted_when_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-planted-secret-42")
    for cls in (UserError, RuntimeFailure):
        assert str(cls("host said sk-lf-planted-secret-42")) == "host said ***"
    err = ProviderError("openai: HTTP 401: Authorization: Bearer tok-0123456789", status=401)
    assert str(err) == "openai: HTTP 401: Authorization: Bearer ***" and err.status == 401
    bad = MalformedReply("x: body 'sk-lf-planted-secret-42'", provider="x", request_id="r")
    assert "planted" not in str(bad) and bad.retryable and bad.status == 200


def test_log_records_are_redacted_for_any_handler(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-planted-for-logs-1234567")
    install_log_redaction()
    install_log_redaction()  # idempotent
    log = logging.getLogger("some.sdk")
    with caplog.at_level(logging.INFO):
        log.info("request headers %s", {"x-api-key": "sk-ant-planted-for-logs-1234567"})
        try:
            raise ValueError("boom with sk-ant-planted-for-logs-1234567")
        except ValueError:
            log.exception("failed")
    assert "planted" not in caplog.text, caplog.text
    assert "request headers {'x-api-key': '***'}" in caplog.text
    assert "ValueError: boom with ***" in caplog.text
