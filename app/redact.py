"""One redaction filter for every text that can reach a user, a log or a report.

:func:`redact` replaces, in this order:

* the **configured secrets**: the values of ``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``,
  ``LANGFUSE_SECRET_KEY`` / ``LANGFUSE_PUBLIC_KEY`` and of every environment variable whose
  name ends in ``_API_KEY`` / ``_TOKEN`` or contains ``SECRET`` / ``PASSWORD`` (values of 8+
  characters), plus the HTTP Basic form of the Langfuse pair (``base64(public:secret)``,
  which is what a host that echoes its ``Authorization`` header shows);
* **auth headers** wherever they appear (``Authorization: Bearer …``, ``Basic …``,
  ``x-api-key: …``, ``api-key=…``, ``?api_key=…`` in a URL);
* **key-shaped tokens** that no variable names (``sk-…``, ``sk-ant-…``, ``sk-lf-…``,
  ``pk-lf-…``, 16+ characters after the prefix).

Each becomes ``***``. Where it is applied: every :class:`~app.errors.RagError` message (at
construction, so a provider error, a judge error or a Langfuse failure is clean wherever
it goes next), every log record (:func:`install_log_redaction`, a record factory, so a
handler added later is covered too), the CLI's error output and crash hook, and each
case's recorded errors before they reach the checkpoint or the report.

Redact *before* truncating: a secret cut in half by ``[:200]`` no longer matches.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from app.wellformed import clean

MASK = "***"
NAMED_SECRETS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_PUBLIC_KEY",
)
_SECRET_NAME = re.compile(r"(_API_KEY$|_TOKEN$|SECRET|PASSWORD|PASSWD)", re.IGNORECASE)
_MIN_LEN = 8

_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization|x-api-key|api[-_]?key|x-goog-api-key)"
    r"(\"?'?\s*[:=]\s*\"?'?)"
    r"(?:(bearer|basic|token)\s+)?"
    r"[^\s\"',;}&]+"
)
# a credential after the scheme: 16+ token characters with at least one digit or symbol
# (so "a basic misunderstanding" stays as it is)
_SCHEME = re.compile(
    r"(?i)\b(bearer|basic)\s+(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{16,}"
)
_QUERY = re.compile(r"(?i)([?&](?:api[-_]?key|key|token|access_token|secret)=)[^&\s\"']+")
_KEY_SHAPED = re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{16,}")


def configured_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secret values to mask, longest first (so a key's prefix never leaves its tail)."""
    env = os.environ if environ is None else environ
    values: set[str] = set()
    for name, value in env.items():
        if not value or len(value) < _MIN_LEN:
            continue
        if name in NAMED_SECRETS or _SECRET_NAME.search(name):
            values.add(value)
    public, secret = env.get("LANGFUSE_PUBLIC_KEY"), env.get("LANGFUSE_SECRET_KEY")
    if public and secret:
        import base64

        pair = base64.b64encode(f"{public}:{secret}".encode()).decode()
        values.update({pair, pair.rstrip("=")})
    return sorted(values, key=len, reverse=True)


def redact(text: str, *extra: str | None, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every configured secret, auth header and key-shaped token masked."""
    if not text:
        return text
    for secret in (*[s for s in extra if s and len(s) >= 4], *configured_secrets(environ)):
        if secret in text:
            text = text.replace(secret, MASK)
    text = _HEADER.sub(lambda m: f"{m[1]}{m[2]}{m[3] + ' ' if m[3] else ''}{MASK}", text)
    text = _SCHEME.sub(lambda m: f"{m[1]} {MASK}", text)
    text = _QUERY.sub(lambda m: f"{m[1]}{MASK}", text)
    return _KEY_SHAPED.sub(MASK, text)


def redact_any(value: Any) -> Any:
    """:func:`redact` applied to every string inside lists / dicts (for JSON records)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_any(v) for v in value]
    if isinstance(value, dict):
        return {k: redact_any(v) for k, v in value.items()}
    return value


_installed = False


def install_log_redaction() -> None:
    """Redact every log record when it is created (idempotent).

    A record factory, not a handler filter: it covers handlers added later (pytest's
    caplog, a file handler of the caller) and third-party loggers (SDKs, Langfuse) alike.
    The message is formatted once, redacted, and stored without its args; a traceback
    attached to the record is formatted and redacted too.
    """
    global _installed
    if _installed:
        return
    import logging

    previous = logging.getLogRecordFactory()
    formatter = logging.Formatter()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a bad format string: keep the raw message
            message = str(record.msg)
        # redacted, and text that is not valid Unicode as U+FFFD (app/wellformed.py): a
        # handler writing UTF-8 never fails on it
        record.msg, record.args = clean(redact(message)), None
        if record.exc_info and not record.exc_text:
            record.exc_text = clean(redact(formatter.formatException(record.exc_info)))
        return record

    logging.setLogRecordFactory(factory)
    _installed = True
