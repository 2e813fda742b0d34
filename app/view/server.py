"""``rag view [DIR]``: the viewer as a local web server (stdlib ``http.server``), bound to
127.0.0.1 only — no account, no upload, nothing leaves the machine.

Routes (ids URL-quoted)::

    /                                   runs in DIR
    /run/<run>                          one run: summary + case table (rows asked page by page)
    /run/<run>/rows?sort=…&page=…       one page of its case rows, filtered and sorted (JSON)
    /run/<run>/case/<case>              one case
    /compare/<base>/<new>               delta table + per-case changes
    /compare/<base>/<new>/case/<case>   both answers side by side, word diff
    /trend                              metric means with 95 % CI per run, by prompt version
    /rollout                            staged rollouts: stage, next step, A/B and trend per arm

Only GET, only with the server's own ``Host`` (:mod:`app.local_http`: a DNS-rebinding page
gets 403), never in a frame.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from app.errors import RagError, UserError
from app.local_http import HOST, host_ok, security_headers
from app.view import pages
from app.view.model import RunStore
from app.wellformed import clean

__all__ = ["make_server", "serve"]

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; form-action 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


def q(text: str) -> str:
    return quote(text, safe="")


class Viewer:
    """Routes a path to a page; ``None``: not found."""

    def __init__(
        self, folder: Path, prompts_root: Path | None = None, answer_log: Path | None = None
    ) -> None:
        self.folder = folder
        self.store = RunStore(folder)
        self.prompts_root = prompts_root
        self.answer_log = answer_log

    def respond(self, path: str) -> tuple[int, str, str]:
        """``(status, body, content type)``: a page, or a run's rows as JSON."""
        url = urlsplit(path)
        parts = [unquote(p) for p in url.path.split("/") if p]
        if len(parts) == 3 and parts[0] == "run" and parts[2] == "rows":
            status, body = self._rows(parts[1], dict(parse_qsl(url.query)))
            return status, body, "application/json; charset=utf-8"
        status, html = self.page(path)
        return status, html, "text/html; charset=utf-8"

    def _rows(self, key: str, query: dict[str, str]) -> tuple[int, str]:
        entry = self.store.get(key)
        if entry is None or entry.summary is None:
            return HTTPStatus.NOT_FOUND, json.dumps({"error": "no such run"})
        try:
            page = self.store.index(entry).page(query, lambda cid: f"/run/{q(key)}/case/{q(cid)}")
        except RagError as exc:
            return HTTPStatus.UNPROCESSABLE_ENTITY, json.dumps({"error": str(exc)})
        body = {
            "rows": page.rows,
            "shown": page.shown,
            "total": page.total,
            "page": page.page,
            "pages": page.pages,
        }
        return HTTPStatus.OK, json.dumps(body, ensure_ascii=False)

    def page(self, path: str) -> tuple[int, str]:
        parts = [unquote(p) for p in urlsplit(path).path.split("/") if p]
        try:
            html = self._route(parts)
        except RagError as exc:
            return HTTPStatus.UNPROCESSABLE_ENTITY, _message("cannot show this", str(exc))
        if html is None:
            return HTTPStatus.NOT_FOUND, _message("not found", "/" + "/".join(parts))
        return HTTPStatus.OK, html

    def _route(self, parts: list[str]) -> str | None:
        from app.eval.compare import compare_reports

        match parts:
            case []:
                entries = self.store.entries()
                return pages.runs_page(
                    entries,
                    str(self.folder),
                    {e.key: f"/run/{q(e.key)}" for e in entries},
                    "/compare/",
                    trend="/trend",
                )
            case ["rollout"]:
                from app.generation.registry import default_root
                from app.paths import logs_dir
                from app.view.rollout import rollout_page

                log = self.answer_log or logs_dir() / "answers.jsonl"
                return rollout_page(self.prompts_root or default_root(), log, home="/")
            case ["trend"]:
                from app.view.trend import trend_page

                return trend_page(self.store.entries(), lambda k: f"/run/{q(k)}", home="/")
            case ["run", key]:
                entry = self.store.get(key)
                if entry is None or entry.summary is None:
                    return None
                from app.view import index as run_index

                index = self.store.index(entry)  # built once per report version, on disk
                if index.total <= run_index.EMBED_ROWS:  # embedded: filtered in the browser
                    rows = index.all_rows(lambda cid: f"/run/{q(key)}/case/{q(cid)}")
                    return pages.run_page_of(entry.summary, rows, home="/")
                return pages.run_page_of(
                    entry.summary, (), home="/", facts=index.facts,
                    rows_url=f"/run/{q(key)}/rows",
                )  # fmt: skip
            case ["run", key, "case", cid]:
                entry = self.store.get(key)
                if entry is None or entry.summary is None:
                    return None
                back = f"/run/{q(key)}"
                index = self.store.index(entry)
                if index.line_layout:  # that one line of the report is read
                    from app.eval.report.stream import typed_case

                    raw = index.case_line(cid)
                    if raw is None:
                        return None
                    case = typed_case(raw, entry.path)
                    return pages.case_page_of(entry.summary, case, back=back, home="/")
                if entry.report is None:
                    return None
                return pages.case_page(entry.report, cid, back=back, home="/")
            case ["compare", a, b, *rest]:
                ea, eb = self.store.get(a), self.store.get(b)
                if ea is None or eb is None or ea.report is None or eb.report is None:
                    return None
                base_url = f"/compare/{q(a)}/{q(b)}"
                if rest == []:
                    comparison = compare_reports(
                        ea.report, eb.report, base_name=a, new_name=b,
                        allow_ruler_change=True, allow_truth_change=True,
                    )  # fmt: skip
                    href = {c.id: f"{base_url}/case/{q(c.id)}" for c in eb.report.cases}
                    return pages.compare_page(
                        ea.report, eb.report, comparison, href,
                        f"/run/{q(a)}", f"/run/{q(b)}", home="/",
                    )  # fmt: skip
                if len(rest) == 2 and rest[0] == "case":
                    cid = rest[1]
                    return pages.compare_case_page(
                        ea.report, eb.report, cid, back=base_url,
                        base_case_href=f"/run/{q(a)}/case/{q(cid)}",
                        new_case_href=f"/run/{q(b)}/case/{q(cid)}", home="/",
                    )  # fmt: skip
                return None
        return None


def _message(title: str, detail: str) -> str:
    from markupsafe import escape

    return (
        f'<!doctype html><html lang="en"><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<body><h1>{escape(title)}</h1><p>{escape(detail)}</p><p><a href="/">runs</a></p></body></html>'
    )


def _handler(viewer: Viewer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "rag-view"

        def do_GET(self) -> None:
            status: int
            if not host_ok(self.headers.get("Host"), int(self.connection.getsockname()[1])):
                status, html = (
                    HTTPStatus.FORBIDDEN,
                    _message("wrong host", "this viewer answers only to its own 127.0.0.1 address"),
                )
                kind = "text/html; charset=utf-8"
            else:
                status, html, kind = viewer.respond(self.path)
            body = clean(html).encode("utf-8")  # not valid Unicode: U+FFFD (app/wellformed.py)
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for name, value in security_headers(CSP):
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # quiet by default
            return

    return Handler


def make_server(
    folder: Path, port: int = 0, prompts_root: Path | None = None, answer_log: Path | None = None
) -> ThreadingHTTPServer:
    """A server on 127.0.0.1 (``port=0``: a free port; read ``server.server_address``)."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder; pass the folder holding eval_*.json reports")
    viewer = Viewer(folder, prompts_root, answer_log)
    server = ThreadingHTTPServer((HOST, port), _handler(viewer))
    server.daemon_threads = True
    return server


def serve(
    folder: Path,
    port: int,
    on_ready: Callable[[str], None],
    prompts_root: Path | None = None,
    answer_log: Path | None = None,
) -> None:
    """Serve until Ctrl-C."""
    server = make_server(folder, port, prompts_root, answer_log)
    host, bound = server.server_address[:2]
    on_ready(f"http://{host!s}:{bound}/")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def serve_in_thread(
    folder: Path, prompts_root: Path | None = None, answer_log: Path | None = None
) -> tuple[ThreadingHTTPServer, str]:
    """For tests: a running server and its base URL; call ``shutdown()`` then ``server_close()``."""
    server = make_server(folder, 0, prompts_root, answer_log)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    return server, f"http://{host!s}:{port}"
