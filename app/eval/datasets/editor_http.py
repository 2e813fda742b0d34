"""The HTTP side of ``rag datasets edit``: a small JSON API on 127.0.0.1 for the page
``editor_page.html`` (see :mod:`app.eval.datasets.editor` for the endpoints), plus the routes
that the wings above register (judge calibration: :mod:`app.eval.report.calibration_queue`).

Every request must name the server exactly in its ``Host`` (``127.0.0.1:PORT`` or
``localhost:PORT``: a DNS-rebinding page gets 403); POSTs must also come from the own origin
as JSON (:func:`app.local_http.cross_site`) and carry ``X-Rag-Editor: 1``, so no other site can
drive the API from a browser; no answer may be framed (:func:`app.local_http.security_headers`).
"""

from __future__ import annotations

import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from app.errors import UserError
from app.eval.datasets import candidates as cands
from app.eval.datasets.commits import GitError, git_saves
from app.eval.datasets.editor import PAGE, Conflict, EditorState, Route, issues
from app.eval.datasets.items import parse_lists
from app.eval.datasets.messages import resolve_lang, say
from app.local_http import cross_site, host_ok, security_headers
from app.retrieval.kb import load_kb

__all__ = ["make_server", "serve"]

MAX_BODY = 8 * 1024 * 1024
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; frame-ancestors 'none'"
)


class _Handler(BaseHTTPRequestHandler):
    state: EditorState  # set on the subclass made by serve()
    server_version = "rag-datasets-edit"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in security_headers(CSP):
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        body = json.dumps(data, ensure_ascii=False).encode("utf-8", "backslashreplace")
        self._send(status, body, "application/json; charset=utf-8")

    def _host_ok(self) -> bool:
        return host_ok(self.headers.get("Host"), int(self.connection.getsockname()[1]))

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> bool:
        """A route a wing above registered (judge calibration); True when one answered."""
        handler = self.state.routes.get(f"{method} {path}")
        if handler is None:
            return False
        try:
            status, data = handler(query, body)
        except (ValueError, KeyError, TypeError) as exc:  # the handler's word on bad input
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return True
        if isinstance(data, bytes):
            self._send(status, data, "text/html; charset=utf-8")
        else:
            self._json(status, data)
        return True

    def do_GET(self) -> None:
        if not self._host_ok():
            self._json(HTTPStatus.FORBIDDEN, {"error": "bad Host"})
            return
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        st = self.state
        try:
            if self._route("GET", url.path, query, None):
                return
            if url.path in {"/", "/index.html"}:
                self._send(HTTPStatus.OK, PAGE.read_bytes(), "text/html; charset=utf-8")
            elif url.path == "/api/suites":
                calibration = "GET /calibrate" in st.routes
                self._json(
                    HTTPStatus.OK,
                    {
                        "suites": st.suites(),
                        "lang": st.lang,
                        "calibration": calibration,
                        **st.git_info(),
                    },
                )
            elif url.path == "/api/suite":
                self._json(HTTPStatus.OK, st.load(query.get("name", "")))
            elif url.path == "/api/fields":
                self._json(HTTPStatus.OK, {"fields": st.fields()})
            elif url.path == "/api/candidates":
                self._json(HTTPStatus.OK, {"files": cands.candidate_files(st.candidates)})
            elif url.path == "/api/candidate-file":
                self._json(HTTPStatus.OK, st.load_candidates(query.get("name", "")))
            elif url.path == "/api/chunks":
                acl = [a for a in query.get("acl", "").split(",") if a]
                self._json(HTTPStatus.OK, {"chunks": st.chunks(query.get("q", ""), acl)})
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {url.path}"})
        except KeyError as exc:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no suite or candidate file {exc}"})
        except UserError as exc:  # a FIFO or device named like a suite, a file over its limit
            self._json(HTTPStatus.UNPROCESSABLE_ENTITY, {"error": str(exc)})

    def do_POST(self) -> None:
        if not self._host_ok():
            self._json(HTTPStatus.FORBIDDEN, {"error": "bad Host"})
            return
        foreign = cross_site(self.headers, int(self.connection.getsockname()[1]))
        if foreign is not None or self.headers.get("X-Rag-Editor") != "1":
            self._json(HTTPStatus.FORBIDDEN, {"error": foreign or "the editor's own page only"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self._json(HTTPStatus.BAD_REQUEST, {"error": "bad Content-Length"})
            return
        url = urlsplit(self.path).path
        st = self.state
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict):
                raise TypeError("the body must be a JSON object")
            if self._route("POST", url, {}, body):
                return
            if url == "/api/expert":
                self._expert(body)
                return
            if url == "/api/pull-request":
                self._pull_request(body)
                return
            suite = str(body["suite"])
            cases = body["cases"]
            if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
                raise TypeError("cases must be a list of objects")
            file = body.get("candidates")
            if file is not None and not isinstance(file, str):
                raise TypeError("candidates must be a file name")
        except (ValueError, KeyError, TypeError) as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"bad request: {exc}"})
            return
        try:
            if url == "/api/validate":
                if file is not None:
                    cands.candidate_path(st.candidates, file)
                parsed = {n: parse_lists(c) for n, c in enumerate(cases)}
                result = st.validate(suite, cases, file=file)
                self._json(
                    HTTPStatus.OK,
                    {
                        "issues": issues(result, st.lang),
                        "ok": not result.errors,
                        "parsed": {n: p for n, p in parsed.items() if p},
                    },
                )
            elif url == "/api/feedback":
                st.newest(suite)  # an unknown suite: 404
                ids = [str(x) for x in body.get("ids") or []]
                self._json(HTTPStatus.OK, {"cases": st.case_feedback(cases, ids)})
            elif url == "/api/accept" and file is not None:
                st.newest(suite)  # an unknown suite: 404
                ids = [str(x) for x in body.get("ids") or []]
                out = st.accept(
                    file, str(body.get("sha256", "")), cases, ids, suite, str(body.get("note", ""))
                )
                status = HTTPStatus.OK if out["accepted"] else HTTPStatus.UNPROCESSABLE_ENTITY
                self._json(status, out)
            elif url == "/api/review" and file is not None:
                reject = [str(x) for x in body.get("reject") or []]
                out = st.review(
                    file, str(body.get("sha256", "")), cases, reject, str(body.get("note", ""))
                )
                status = HTTPStatus.OK if out["saved"] else HTTPStatus.UNPROCESSABLE_ENTITY
                self._json(status, out)
            elif url == "/api/save":
                out = st.save(suite, cases, str(body.get("sha256", "")), str(body.get("note", "")))
                status = HTTPStatus.OK if out["saved"] else HTTPStatus.UNPROCESSABLE_ENTITY
                self._json(status, out)
            else:
                self._json(HTTPStatus.NOT_FOUND, {"error": f"no such endpoint: {url}"})
        except Conflict as exc:
            self._json(HTTPStatus.CONFLICT, {"saved": False, "error": str(exc)})
        except KeyError as exc:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no suite or candidate file {exc}"})
        except UserError as exc:  # a FIFO or device named like a suite, a file over its limit
            self._json(HTTPStatus.UNPROCESSABLE_ENTITY, {"saved": False, "error": str(exc)})

    def _expert(self, body: dict[str, Any]) -> None:
        """Store who the expert is (asked once; kept in the checkout's git config)."""
        git = self.state.git
        if git is None:
            self._json(HTTPStatus.CONFLICT, {"error": "not in a git work tree: nothing to store"})
            return
        try:
            expert = git.set_expert(str(body.get("name", "")), str(body.get("email", "")))
        except ValueError as exc:
            self._json(
                HTTPStatus.UNPROCESSABLE_ENTITY,
                {"error": say(f"expert.bad-{exc}", self.state.lang), "field": str(exc)},
            )
            return
        self._json(HTTPStatus.OK, {"name": expert.name, "email": expert.email})

    def _pull_request(self, body: dict[str, Any]) -> None:
        git = self.state.git
        if git is None:
            self._json(HTTPStatus.CONFLICT, {"error": "not in a git work tree"})
            return
        title = str(body.get("title") or "").strip() or "datasets: expert change"
        text = str(body.get("body") or "").strip() or "Saved in `rag datasets edit`."
        try:
            pr = git.pull_request(title, text, create=bool(body.get("create")))
        except GitError as exc:
            self._json(HTTPStatus.CONFLICT, {"error": str(exc)})
            return
        self._json(
            HTTPStatus.OK,
            {
                "branch": pr.branch,
                "base": pr.base,
                "commands": list(pr.commands),
                "url": pr.url,
                "gh": pr.gh,
            },
        )


def make_server(state: EditorState, port: int = 0) -> ThreadingHTTPServer:
    """A server bound to 127.0.0.1 (``port`` 0: any free port); call ``serve_forever``."""
    handler = type("Handler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    return server


def serve(
    folder: Path,
    kb_root: Path,
    *,
    port: int = 8765,
    lang: str | None = None,
    candidates: Path | None = None,
    routes: dict[str, Route] | None = None,
) -> ThreadingHTTPServer:
    """The editor's server for ``folder``, the KB at ``kb_root`` and the mined candidates in
    ``candidates`` (not yet serving); saves are commits when ``folder`` is in a git work tree;
    ``routes`` add pages from the wings above (judge calibration)."""
    state = EditorState(
        folder=folder,
        kb=load_kb(kb_root),
        lang=resolve_lang(lang),
        candidates=candidates,
        git=git_saves(folder),
        routes=dict(routes or {}),
    )
    threading.Thread(target=state.warm, name="editor-warm", daemon=True).start()
    return make_server(state, port)
