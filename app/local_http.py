"""The guard of every HTTP server the project runs on this machine: ``rag view``, ``rag
datasets edit`` and the local model server (``tools/node/llm-server.mjs`` applies the same
three rules in JavaScript).

A server bound to 127.0.0.1 is still reachable from any web page the user opens: through
DNS rebinding (``evil.test`` resolving to 127.0.0.1 after the page loaded: the browser then
sends ``Host: evil.test:PORT`` and lets the page read the answer) and through "simple"
cross-site requests (a form or ``fetch`` with ``text/plain``, sent without a CORS preflight).
So:

1. **Host, exact.** Only ``127.0.0.1:PORT`` and ``localhost:PORT`` (the server's own port)
   are answered; anything else (``evil.test:PORT``, ``127.0.0.1:PORT.evil.test``, none) gets
   403 before routing.
2. **No framing, nothing foreign.** Every answer carries a Content-Security-Policy with
   ``frame-ancestors 'none'`` (plus ``X-Frame-Options: DENY`` for older browsers),
   ``nosniff``, ``Referrer-Policy: no-referrer`` and ``Cross-Origin-Resource-Policy:
   same-origin``.
3. **State changes from the own origin only.** A request that changes state (POST) is
   refused when the browser says it is cross-site (``Sec-Fetch-Site``), when it carries an
   ``Origin`` that is not the server's own, or when its body is not ``application/json``
   (the types a page elsewhere can send without a preflight: forms, ``text/plain``).
   Programs (the SDKs, curl with a JSON body) send no ``Origin`` and pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from email.message import Message

__all__ = ["HOST", "cross_site", "host_ok", "own_origins", "security_headers"]

HOST = "127.0.0.1"
_NAMES = ("127.0.0.1", "localhost")


def _own_hosts(port: int) -> frozenset[str]:
    names = {f"{name}:{port}" for name in _NAMES}
    if port == 80:  # the default port may be left out of Host
        names.update(_NAMES)
    return frozenset(names)


def host_ok(host: str | None, port: int) -> bool:
    """Whether a request's ``Host`` header names this server exactly (rule 1)."""
    return host is not None and host.strip().lower() in _own_hosts(port)


def own_origins(port: int) -> frozenset[str]:
    return frozenset(f"http://{host}" for host in _own_hosts(port))


def cross_site(headers: Mapping[str, str] | Message, port: int) -> str | None:
    """Why a state-changing request must be refused (rule 3), or None when it may go on.
    ``headers``: the request's headers (``http.server``'s message or a mapping)."""
    get = headers.get
    site = (get("Sec-Fetch-Site") or "").strip().lower()
    if site in ("cross-site", "same-site"):
        return f"a {site} request (Sec-Fetch-Site) may not change anything here"
    origin = get("Origin")
    if origin is not None and origin.strip().lower() not in own_origins(port):
        return f"requests from {origin!r} may not change anything here"
    media = (get("Content-Type") or "").split(";")[0].strip().lower()
    if media != "application/json":
        return f"the body must be application/json, not {media or 'untyped'}"
    return None


def security_headers(csp: str) -> list[tuple[str, str]]:
    """The headers of rule 2 for a page whose own policy is ``csp`` (``frame-ancestors
    'none'`` is added when it is not in it)."""
    if "frame-ancestors" not in csp:
        csp = f"{csp.rstrip('; ')}; frame-ancestors 'none'"
    return [
        ("Content-Security-Policy", csp),
        ("X-Frame-Options", "DENY"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cross-Origin-Resource-Policy", "same-origin"),
    ]
