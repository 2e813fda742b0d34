"""The exceptions of rag-starter, in one place.

::

    RagError                      base of everything we raise on purpose
    ├── UserError                 bad input or configuration: the CLI exits 2, no traceback
    │   ├── ConfigError           a setting, provider string, or missing environment variable
    │   ├── PromptError           a prompt id/version/model/variable problem at render time
    │   ├── DatasetError          an unreadable dataset or knowledge base
    │   └── ReportError           an unreadable or incompatible report
    └── RuntimeFailure            something failed while running (provider, judge, memory budget)
        ├── ProviderError         a model call failed after retries (carries provider + request id)
        │   └── MalformedReply    a 200 reply that is not a usable completion (HTML, cut JSON,
        │                         no choices, null message, wrong content type): transient
        ├── JudgeParseError       a judge answer that did not parse after one repair attempt
        └── BudgetExceeded        a token / cost budget that cannot be met

Every message names the thing (file:line, prompt id, model, variable) and says what to do,
and passes :func:`app.redact.redact` when the error is made: no configured secret, auth
header or key-shaped token survives into a message, wherever it is printed or stored.
"""

from __future__ import annotations

from typing import Any

from app.redact import redact


class RagError(Exception):
    """Base class of all errors raised on purpose by rag-starter (messages redacted)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class UserError(RagError):
    """Bad input or configuration. The CLI prints the message and exits 2."""

    exit_code = 2


class ConfigError(UserError):
    """A setting, provider string or environment variable is wrong or missing."""


class PromptError(UserError):
    """A prompt cannot be found or rendered as asked (unknown id, model or variable)."""


class DatasetError(UserError):
    """A dataset or knowledge base cannot be read."""


class ReportError(UserError):
    """A report cannot be read, or two reports cannot be compared."""


class RuntimeFailure(RagError):
    """Something failed while running; the run records it and goes on where it can."""

    exit_code = 1


class ProviderError(RuntimeFailure):
    """A model call failed (after the retries the policy allows)."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        request_id: str | None = None,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.request_id = request_id
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after


class MalformedReply(ProviderError):
    """A ``200`` whose body is not a usable completion. Retryable: a proxy's HTML page, a cut
    body or a ``null`` message is a transient fault of the path, not of the request."""

    def __init__(self, message: str, *, provider: str = "", request_id: str | None = None) -> None:
        super().__init__(
            message, provider=provider, request_id=request_id, status=200, retryable=True
        )


class JudgeParseError(RuntimeFailure):
    """A judge response that is not the JSON its prompt asks for, even after one repair."""


class BudgetExceeded(RuntimeFailure):
    """A token or cost budget that cannot be met (e.g. summary memory below two messages)."""
