"""``rag datasets edit``: a case editor in the browser, served on 127.0.0.1 only.

One page (``editor_page.html``, plain JavaScript, no build step) talks to a small JSON API:

* ``GET  /api/suites`` — every suite, its versions and which file an edit goes to;
* ``GET  /api/suite?name=S`` — the cases of the suite's newest file (raw JSON objects; a line
  that does not parse comes back as ``{"__raw__": text}``) and that file's sha256;
* ``GET  /api/fields`` — each field's help, in the run's language;
* ``GET  /api/chunks?q=TEXT&acl=a,b`` — KB chunks matching text / heading / id that the ACL
  may read (the picker never offers a chunk the case's ``acl`` cannot read);
* ``POST /api/validate`` — the suite as edited, checked by ``rag datasets check``'s own
  checker (:func:`app.eval.datasets.check.check_text`);
* ``POST /api/save`` — refused while the check finds an error; otherwise written atomically
  into the *next version* file (a copy of a released file is never edited in place) plus a
  CHANGELOG.md entry, or into the draft that an earlier save created. A file that changed
  on disk since the page loaded it is never overwritten: the save answers 409.

Mined candidates (``rag datasets mine``; :mod:`app.eval.datasets.candidates`):

* ``GET  /api/candidates`` — the candidate files under ``reports/candidates/``;
* ``GET  /api/candidate-file?name=F`` — its candidates and sha256, like ``/api/suite``;
* ``POST /api/validate`` with ``"candidates": F`` — each candidate checked as a case of
  ``suite`` (line numbers are the candidate file's; ids against every suite);
* ``POST /api/review`` — the page's edits written back into the candidate file without
  accepting, those in ``reject`` marked rejected with ``note`` as the reason;
* ``POST /api/accept`` — the reviewed candidates ``ids`` into ``suite`` through the save
  above (refused, line by line, while one has an error), then marked accepted in F.

A file is *released* when git tracks it at ``HEAD`` (outside a git work tree: every file
that this server did not create). Writes go to a temporary file and ``os.replace``; a new
version file is created with ``os.link`` so that it never replaces one that appeared meanwhile.
POSTs must carry ``X-Rag-Editor: 1`` and a ``Host`` of 127.0.0.1/localhost (no other site can
drive the API from a browser).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from app.eval.datasets import candidates as cands
from app.eval.datasets.case import CASE_FIELDS, Case, available_suites, iter_lines
from app.eval.datasets.check import check_text, suite_ids
from app.eval.datasets.issues import CheckResult, Sink, show
from app.eval.datasets.messages import FIELD_HINTS, Lang, resolve_lang
from app.eval.datasets.versions import (
    CHANGELOG_STUB,
    append_changelog,
    author,
    is_released,
    next_version_name,
)
from app.retrieval.kb import KnowledgeBase, can_read, load_kb

__all__ = ["EditorState", "serve"]

PAGE = Path(__file__).with_name("editor_page.html")
MAX_BODY = 8 * 1024 * 1024


class Conflict(Exception):
    """The file on disk is not the one the page loaded."""


@dataclass
class EditorState:
    """What the server knows: the folders, the KB, the language and the drafts it wrote."""

    folder: Path
    kb: KnowledgeBase
    lang: Lang = "en"
    who: str = ""
    created: set[str] = field(default_factory=set)  # realpaths of files this server wrote
    lock: threading.RLock = field(default_factory=threading.RLock)
    candidates: Path | None = None  # the folder `rag datasets mine` writes (reports/candidates)

    # ------------------------------------------------------------------ reading
    def released(self, path: Path) -> bool:
        if os.path.realpath(path) in self.created:
            return False
        return is_released(path)

    def suites(self) -> list[dict[str, Any]]:
        rows = []
        for name, versions in sorted(available_suites(self.folder).items()):
            (major, minor), newest = versions[-1]
            released = self.released(newest)
            target = (
                newest.name if not released else next_version_name(name, major, minor, False)[0]
            )
            rows.append(
                {
                    "name": name,
                    "versions": [f"{a}.{b}" for (a, b), _ in versions],
                    "file": newest.name,
                    "released": released,
                    "saves_to": target,
                }
            )
        return rows

    def newest(self, name: str) -> Path:
        versions = available_suites(self.folder).get(name)
        if not versions:
            raise KeyError(name)
        return versions[-1][1]

    def load(self, name: str) -> dict[str, Any]:
        path = self.newest(name)
        cases, sha = cands.read_objects(path)
        return {
            "name": name,
            "file": path.name,
            "sha256": sha,
            "released": self.released(path),
            "cases": cases,
        }

    def fields(self) -> list[dict[str, Any]]:
        required = {n for n, f in Case.model_fields.items() if f.is_required()}
        index = 1 if self.lang == "zh" else 0
        return [
            {"name": n, "required": n in required, "help": FIELD_HINTS[n][index]}
            for n in CASE_FIELDS
        ]

    def chunks(self, query: str, acl: list[str], limit: int = 30) -> list[dict[str, Any]]:
        q = query.strip().lower()
        out = []
        for c in self.kb.chunks:
            if not can_read(acl, c.acl):
                continue
            hay = f"{c.chunk_id}\n{c.heading}\n{c.title}\n{c.text}".lower()
            if q and q not in hay:
                continue
            first = next(
                (x for x in c.text.splitlines() if x.strip() and not x.startswith("#")), ""
            )
            out.append(
                {"id": c.chunk_id, "heading": c.heading, "acl": list(c.acl), "first": first[:160]}
            )
            if len(out) >= limit:
                break
        return out

    # ------------------------------------------------------------------ checking
    def other_ids(self, suite: str) -> dict[str, tuple[str, str]]:
        """Ids of the other suites (newest and older files), for uniqueness across suites."""
        return suite_ids(self.folder, besides=suite)

    @staticmethod
    def render(cases: list[dict[str, Any]], source: Path) -> str:
        """The JSONL text; an unchanged case keeps its line exactly as it was in ``source``."""
        original: dict[str, tuple[Any, str]] = {}
        for _, line in iter_lines(source.read_text(encoding="utf-8", errors="replace")):
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                original.setdefault(obj["id"], (obj, line))
        lines = []
        for case in cases:
            raw = case.get("__raw__")
            if isinstance(raw, str):
                lines.append(raw)
                continue
            before = original.get(str(case.get("id")))
            same = before is not None and before[0] == case
            lines.append(before[1] if same and before else json.dumps(case, ensure_ascii=False))
        return "".join(f"{x}\n" for x in lines)

    def validate(
        self, suite: str, cases: list[dict[str, Any]], *, file: str | None = None
    ) -> CheckResult:
        """The check of ``cases`` as ``suite``'s file; with ``file`` (a candidate file's
        name) of candidates that would join ``suite``: their ids against every suite's, an
        accepted one not checked again."""
        if file is not None:
            cases = [
                {"id": c.get("id")} if cands.is_accepted(c) else cands.as_case(c) for c in cases
            ]
        # ASCII escapes for the check: a lone surrogate stays a JSON escape the checker names
        text = "".join(
            (c["__raw__"] if isinstance(c.get("__raw__"), str) else json.dumps(c)) + "\n"
            for c in cases
        )
        every = suite_ids(self.folder, besides="") if file else {}
        result = check_text(
            text,
            suite=suite,
            file=file or suite,
            kb=self.kb,
            lang=self.lang,
            other_ids=every if file else self.other_ids(suite),
        )
        if file is not None:
            # the checker takes an id already in `suite` for that case, updated; a candidate
            # would be a second case with it
            sink = Sink(file, result)
            for n, c in enumerate(cases, 1):
                first = every.get(str(c.get("id")))
                if first is not None and first[0] == suite and set(c) != {"id"}:
                    sink.add(
                        n,
                        "id",
                        "duplicate-id.suite",
                        code="duplicate-id",
                        value=show(c["id"]),
                        suite=suite,
                        where=first[1],
                    )
            # the stand-in lines of accepted candidates say nothing
            skip = {n for n, c in enumerate(cases, 1) if set(c) == {"id"}}
            result.issues[:] = sorted(
                (i for i in result.issues if i.line not in skip), key=lambda i: i.line or 0
            )
        return result

    # ------------------------------------------------------------------ candidates
    def load_candidates(self, name: str) -> dict[str, Any]:
        path = cands.candidate_path(self.candidates, name)
        cases, sha = cands.read_objects(path)
        return {"name": name, "sha256": sha, "cases": cases}

    def accept(
        self,
        name: str,
        base: str,
        cases: list[dict[str, Any]],
        ids: list[str],
        suite: str,
        note: str,
    ) -> dict[str, Any]:
        """Candidates ``ids`` (as reviewed in ``cases``) into ``suite``, then marked accepted."""
        with self.lock:
            path = cands.candidate_path(self.candidates, name)
            if cands.read_objects(path)[1] != base:
                raise Conflict(
                    f"{name} changed on disk since the page loaded it — your review is still "
                    "in the page; reload the file in another tab, merge, then accept"
                )
            chosen = [
                n
                for n, c in enumerate(cases)
                if c.get("id") in ids and not cands.is_accepted(c) and "__raw__" not in c
            ]
            if not chosen:
                return {"accepted": False, "error": "no candidate to accept", "issues": []}
            result = self.validate(suite, cases, file=name)
            lines = {n + 1 for n in chosen}
            problems = [i for i in result.issues if i.line in lines or i.line is None]
            if any(i.severity == "error" for i in problems):
                return {"accepted": False, "issues": [issue(i) for i in problems]}
            current = self.load(suite)
            ids_text = ", ".join(str(cases[n]["id"]) for n in chosen)
            saved = self.save(
                suite,
                [*current["cases"], *(cands.as_case(cases[n]) for n in chosen)],
                current["sha256"],
                note.strip() or f"accepted mined candidate(s) {ids_text} from {name}",
            )
            if not saved["saved"]:
                return {"accepted": False, "issues": saved["issues"]}
            updated = [dict(c) for c in cases]
            for n in chosen:
                updated[n].update(status=cands.ACCEPTED, accepted_into=saved["file"])
            _replace(path, cands.render_candidates(updated))
            return {
                "accepted": True,
                "file": saved["file"],
                "sha256": cands.read_objects(path)[1],
                "cases": updated,
                "issues": [issue(i) for i in problems],
            }

    def review(
        self, name: str, base: str, cases: list[dict[str, Any]], reject: list[str], note: str
    ) -> dict[str, Any]:
        """Write the page's review of candidate file ``name`` back into it without accepting
        anything: the edited candidates, and those ``reject`` marked rejected (``note`` is the
        reason, required). Accepted candidates keep their line as on disk."""
        with self.lock:
            path = cands.candidate_path(self.candidates, name)
            on_disk, sha = cands.read_objects(path)
            if sha != base:
                raise Conflict(
                    f"{name} changed on disk since the page loaded it — your review is still "
                    "in the page; reload the file in another tab, merge, then save"
                )
            if len(cases) != len(on_disk):
                return {"saved": False, "error": "the page's candidates do not match the file"}
            if reject and not note.strip():
                return {"saved": False, "error": "say why it is rejected (the note field)"}
            updated = []
            for old, new in zip(on_disk, cases, strict=True):
                if cands.is_accepted(old):
                    updated.append(old)
                    continue
                new = dict(new)
                if "__raw__" not in new and new.get("id") in reject:
                    new.update(status=cands.REJECTED, rejected_reason=note.strip())
                updated.append(new)
            _replace(path, cands.render_candidates(updated))
            return {"saved": True, "sha256": cands.read_objects(path)[1], "cases": updated}

    # ------------------------------------------------------------------ saving
    def save(self, suite: str, cases: list[dict[str, Any]], base: str, note: str) -> dict[str, Any]:
        with self.lock:
            result = self.validate(suite, cases)
            if result.errors:
                return {"saved": False, "issues": issues(result)}
            source = self.newest(suite)
            current = hashlib.sha256(source.read_bytes()).hexdigest()
            if current != base:
                raise Conflict(
                    f"{source.name} changed on disk since the page loaded it — your edits are "
                    "still in the page; reload the suite in another tab, merge, then save"
                )
            text = self.render(cases, source)
            if self.released(source):
                parsed = available_suites(self.folder)[suite][-1][0]
                name, version = next_version_name(suite, parsed[0], parsed[1], False)
                target = self.folder / name
                _create(target, text)
                self.created.add(os.path.realpath(target))
                day = dt.datetime.now(dt.UTC).date().isoformat()
                append_changelog(
                    self.folder,
                    f"{suite} v{version} — {day} — {self.who or author()}",
                    f"minor: copied from `{source.name}` and edited in `rag datasets edit`.\n\n"
                    f"- {note.strip() or CHANGELOG_STUB}",
                )
            else:
                target = source
                _replace(target, text)
            data = target.read_bytes()
            return {
                "saved": True,
                "file": target.name,
                "sha256": hashlib.sha256(data).hexdigest(),
                "issues": issues(result),
            }


def _create(target: Path, text: str) -> None:
    """Write a new file atomically; never replace one that exists (even one made meanwhile)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    _write(tmp, text)
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise Conflict(
            f"{target.name} appeared on disk meanwhile — reload and save again"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def _replace(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    _write(tmp, text)
    os.replace(tmp, target)


def _write(path: Path, text: str) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def issues(result: CheckResult) -> list[dict[str, Any]]:
    return [issue(i) for i in result.issues]


def issue(i: Any) -> dict[str, Any]:
    return {
        "line": i.line,
        "field": i.field,
        "message": i.message,
        "fix": i.fix,
        "severity": i.severity,
        "code": i.code,
    }


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
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        body = json.dumps(data, ensure_ascii=False).encode("utf-8", "backslashreplace")
        self._send(status, body, "application/json; charset=utf-8")

    def _host_ok(self) -> bool:
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        return host in {"127.0.0.1", "localhost"}

    def do_GET(self) -> None:
        if not self._host_ok():
            self._json(HTTPStatus.FORBIDDEN, {"error": "bad Host"})
            return
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        st = self.state
        try:
            if url.path in {"/", "/index.html"}:
                self._send(HTTPStatus.OK, PAGE.read_bytes(), "text/html; charset=utf-8")
            elif url.path == "/api/suites":
                self._json(HTTPStatus.OK, {"suites": st.suites(), "lang": st.lang})
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

    def do_POST(self) -> None:
        if not self._host_ok() or self.headers.get("X-Rag-Editor") != "1":
            self._json(HTTPStatus.FORBIDDEN, {"error": "the editor's own page only"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self._json(HTTPStatus.BAD_REQUEST, {"error": "bad Content-Length"})
            return
        try:
            body = json.loads(self.rfile.read(length))
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
        st = self.state
        url = urlsplit(self.path).path
        try:
            if url == "/api/validate":
                if file is not None:
                    cands.candidate_path(st.candidates, file)
                result = st.validate(suite, cases, file=file)
                self._json(HTTPStatus.OK, {"issues": issues(result), "ok": not result.errors})
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
) -> ThreadingHTTPServer:
    """The editor's server for ``folder``, the KB at ``kb_root`` and the mined candidates in
    ``candidates`` (not yet serving)."""
    state = EditorState(
        folder=folder, kb=load_kb(kb_root), lang=resolve_lang(lang), candidates=candidates
    )
    return make_server(state, port)
