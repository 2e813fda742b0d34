"""``rag datasets edit``: a case editor in the browser, served on 127.0.0.1 only (the HTTP
side: :mod:`app.eval.datasets.editor_http`; this module is what the server knows and does).

One page (``editor_page.html``, plain JavaScript, no build step) talks to a small JSON API:

* ``GET  /api/suites`` — every suite, its versions and which file an edit goes to, and the
  git side (commits on, the expert, the branch);
* ``GET  /api/suite?name=S`` — the cases of the suite's newest file (raw JSON objects; a line
  that does not parse comes back as ``{"__raw__": text}``) and that file's sha256;
* ``GET  /api/fields`` — each field's name and help, in the run's language and in the
  editor's own format (:mod:`app.eval.datasets.hints`);
* ``GET  /api/chunks?q=TEXT&acl=a,b`` — KB chunks matching text / heading / id that the ACL
  may read (the picker never offers a chunk the case's ``acl`` cannot read);
* ``POST /api/validate`` — the suite as edited, checked by ``rag datasets check``'s own
  checker (:func:`app.eval.datasets.check.check_text`); a list field may come as the text of
  its box, parsed by :func:`app.eval.datasets.items.parse_items` and sent back (``parsed``)
  so the page shows the items before anything is saved;
* ``POST /api/feedback`` — what the offline pipeline does with the cases ``ids``
  (:mod:`app.eval.datasets.feedback`: golden chunk ranks, must_include in the golden passage,
  assembly mode vs expected_refusal, who can read the golden chunks);
* ``POST /api/save`` — refused while the check finds an error; otherwise written atomically
  into the *next version* file (a copy of a released file is never edited in place) plus a
  CHANGELOG.md entry, or into the draft that an earlier save created (its note added to the
  draft's entry). A case whose content changed gets its ``version`` raised. A file that
  changed on disk since the page loaded it is never overwritten: the save answers 409. In a
  git work tree the save is then a commit by the expert (:mod:`app.eval.datasets.commits`);
  without a stored expert the save answers ``need_expert`` and writes nothing;
* ``POST /api/expert`` — the expert's name and email, stored once in the checkout;
* ``POST /api/pull-request`` — push + ``gh pr create`` (``create``), or the commands to run.

Mined candidates (``rag datasets mine``; :mod:`app.eval.datasets.candidates`):

* ``GET  /api/candidates`` — the candidate files under ``reports/candidates/``;
* ``GET  /api/candidate-file?name=F`` — its candidates and sha256, like ``/api/suite``;
* ``POST /api/validate`` with ``"candidates": F`` — each candidate checked as a case of
  ``suite`` (line numbers are the candidate file's; ids against every suite);
* ``POST /api/review`` — the page's edits written back into the candidate file without
  accepting, those in ``reject`` marked rejected with ``note`` as the reason;
* ``POST /api/accept`` — the reviewed candidates ``ids`` into ``suite`` through the save
  above (refused, line by line, while one has an error), then marked accepted in F.

A file is *released* when the base branch has it (:meth:`GitSaves.released`, even a draft this
server created; outside a git work tree: every file that this server did not create). Every
write goes through :mod:`app.eval.datasets.store`: under the folder's cross-process lock, a
compare-and-swap on the file's sha256, the version file and its CHANGELOG entry as one step;
a new version file never replaces one that appeared meanwhile.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.eval.datasets import candidates as cands
from app.eval.datasets.anchors import add_anchors
from app.eval.datasets.case import CASE_FIELDS, Case, available_suites, iter_lines, parse_file_name
from app.eval.datasets.check import check_text, suite_ids
from app.eval.datasets.commits import GitError, GitSaves
from app.eval.datasets.hints import hint, label
from app.eval.datasets.issues import CheckResult, Sink, show
from app.eval.datasets.items import parse_lists
from app.eval.datasets.messages import Lang, say
from app.eval.datasets.store import Conflict, Write, commit, digest, locked, read_file
from app.eval.datasets.versions import (
    author,
    changelog_write,
    is_released,
    next_version_name,
    raise_versions,
    released_cases,
    with_entry,
    with_note,
)
from app.retrieval.kb import KnowledgeBase, can_read
from app.safe_io import atomic_write_text

__all__ = ["Conflict", "EditorState", "Route", "issue", "issues"]

PAGE = Path(__file__).with_name("editor_page.html")


#: a route from a wing above: (query, JSON body or None) -> (HTTP status, JSON data or HTML)
Route = Callable[[dict[str, str], Any], tuple[int, Any]]


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
    git: GitSaves | None = None  # saves are commits by the expert (None: not in a work tree)
    #: routes served from the wings above (judge calibration): "GET /path" -> handler
    routes: dict[str, Route] = field(default_factory=dict)
    feedback: Any = None  # app.eval.datasets.feedback.Feedback, built at the first use
    _feedback_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # ------------------------------------------------------------------ reading
    def released(self, path: Path) -> bool:
        """In a git work tree: the base branch has the file (a draft this server created and
        that was committed there since is released too). Outside one: every file this server
        did not create."""
        if self.git is not None:
            return self.git.released(path)
        if os.path.realpath(path) in self.created:
            return False
        return is_released(path)

    def released_cases(self, suite: str) -> dict[str, dict[str, Any]]:
        """Each id's case in the newest released file of ``suite`` (what a save compares with
        to raise a changed case's ``version``)."""
        return released_cases(self.folder, suite, self.released)

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
        return [
            {
                "name": n,
                "label": label(n, self.lang),
                "required": n in required,
                "help": hint(n, self.lang, "editor"),
            }
            for n in (*CASE_FIELDS, "role", "content")
        ]

    def chunks(self, query: str, acl: list[str], limit: int = 30) -> list[dict[str, Any]]:
        from app.text import mentions

        q = query.strip()
        out = []
        for c in self.kb.chunks:
            if not can_read(acl, c.acl):
                continue
            hay = f"{c.chunk_id}\n{c.heading}\n{c.title}\n{c.text}"
            if q and not mentions(hay, [q]):  # NFKC + case-folded (app.text.match)
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

    def git_info(self) -> dict[str, Any]:
        """What the page shows about saving: commits on, the expert, the branch."""
        if self.git is None:
            return {"git": False}
        expert = self.git.expert()
        try:
            branch = self.git.branch()
        except GitError:
            branch = ""
        return {
            "git": True,
            "base": self.git.base,
            "branch": branch,
            "expert": None if expert is None else {"name": expert.name, "email": expert.email},
        }

    def warm(self) -> None:
        """Build the offline pipeline's retriever (and its model) once, so that the first
        feedback is as quick as the next (``serve`` calls it in the background)."""
        from app.eval.datasets.feedback import Feedback  # the retriever loads on first use

        with self._feedback_lock:
            if self.feedback is None:
                self.feedback = Feedback(self.kb)
                self.feedback.case({"question": "warm", "acl": ["public"]})

    def case_feedback(self, cases: list[dict[str, Any]], ids: list[str]) -> list[dict[str, Any]]:
        """What the offline pipeline does with each case ``ids`` (every case when empty)."""
        self.warm()
        chosen = [c for c in cases if "__raw__" not in c and (not ids or str(c.get("id")) in ids)]
        for case in chosen:
            parse_lists(case)
        out: list[dict[str, Any]] = self.feedback.cases(chosen, self.lang)
        return out

    # ------------------------------------------------------------------ checking
    def other_ids(self, suite: str) -> dict[str, tuple[str, str]]:
        """Ids of the other suites (newest and older files), for uniqueness across suites."""
        return suite_ids(self.folder, besides=suite)

    def anchor_changed(self, cases: list[dict[str, Any]], source: Path) -> None:
        """Anchor the labels of every case the page changed (a label picked in the editor
        follows its passage like the others; an anchor of a removed label goes with it)."""
        original = _originals(source)
        for case in cases:
            if "__raw__" in case:
                continue
            before = original.get(str(case.get("id")))
            if before is None or before[0] != case:
                add_anchors(case, self.kb)

    @staticmethod
    def render(cases: list[dict[str, Any]], source: Path) -> str:
        """The JSONL text; an unchanged case keeps its line exactly as it was in ``source``."""
        original = _originals(source)
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
        for case in cases:
            parse_lists(case)  # a text box's list, as the page shows it parsed
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
            place="editor",
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
        path = cands.candidate_path(self.candidates, name)
        with self.lock, locked(path.parent):
            if cands.read_objects(path)[1] != base:
                raise Conflict(say("conflict.review", self.lang, name=name, then="accept"))
            chosen = [
                n
                for n, c in enumerate(cases)
                if c.get("id") in ids and not cands.is_accepted(c) and "__raw__" not in c
            ]
            if not chosen:
                return {"accepted": False, "error": say("no-candidate", self.lang), "issues": []}
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
        path = cands.candidate_path(self.candidates, name)
        with self.lock, locked(path.parent):
            on_disk, sha = cands.read_objects(path)
            if sha != base:
                raise Conflict(say("conflict.review", self.lang, name=name, then="save"))
            if len(cases) != len(on_disk):
                return {"saved": False, "error": say("candidates-mismatch", self.lang)}
            if reject and not note.strip():
                return {"saved": False, "error": say("reject-why", self.lang)}
            updated = []
            for old, new in zip(on_disk, cases, strict=True):
                if cands.is_accepted(old):
                    updated.append(old)
                    continue
                new = dict(new)
                parse_lists(new)  # the text of a list box, as the page showed it parsed
                if "__raw__" not in new and new.get("id") in reject:
                    new.update(status=cands.REJECTED, rejected_reason=note.strip())
                updated.append(new)
            _replace(path, cands.render_candidates(updated))
            return {"saved": True, "sha256": cands.read_objects(path)[1], "cases": updated}

    # ------------------------------------------------------------------ saving
    def save(self, suite: str, cases: list[dict[str, Any]], base: str, note: str) -> dict[str, Any]:
        """Write ``cases`` as ``suite`` if its newest file still has the sha256 ``base``: the
        next version (a released file) or the draft, and the CHANGELOG entry, in one step
        under the folder's lock (:mod:`app.eval.datasets.store`), then the expert's commit."""
        with self.lock, locked(self.folder):
            result = self.validate(suite, cases)
            if result.errors:
                return {"saved": False, "issues": issues(result, self.lang)}
            if not note.strip():  # every save says what changed and why, in the CHANGELOG
                return {
                    "saved": False,
                    "issues": issues(result, self.lang),
                    "error": say("note-needed", self.lang),
                }
            expert = self.git.expert() if self.git is not None else None
            if self.git is not None and expert is None:
                return {"saved": False, "need_expert": True, "issues": []}
            source = self.newest(suite)
            if digest(read_file(source)) != base:
                raise Conflict(say("conflict.suite", self.lang, name=source.name))
            self.anchor_changed(cases, source)
            raised = raise_versions(cases, self.released_cases(suite))
            data = self.render(cases, source).encode("utf-8")
            who = expert.name if expert is not None else (self.who or author())
            if self.released(source):
                parsed = available_suites(self.folder)[suite][-1][0]
                name, version = next_version_name(suite, parsed[0], parsed[1], False)
                target = self.folder / name
                day = dt.datetime.now(dt.UTC).date().isoformat()
                title = f"{suite} v{version} — {day} — {who}"
                body = (
                    f"minor: copied from `{source.name}` and edited in `rag datasets edit`.\n\n"
                    f"- {note.strip()}"
                )
                commit(
                    self.folder,
                    [
                        Write(target, data, None),
                        changelog_write(self.folder, lambda t: with_entry(t, title, body)),
                    ],
                )
                self.created.add(os.path.realpath(target))
            else:
                target = source
                parts = parse_file_name(target.name)
                version = f"{parts[1]}.{parts[2]}" if parts else ""
                edit = lambda t: with_note(t, suite, version, note, who=who)  # noqa: E731
                commit(self.folder, [Write(target, data, base), changelog_write(self.folder, edit)])
            out: dict[str, Any] = {
                "saved": True,
                "file": target.name,
                "sha256": digest(data),
                "issues": issues(result, self.lang),
                "raised": raised,
                "cases": cases,
            }
            if self.git is not None and expert is not None:
                try:
                    commit_ = self.git.commit(
                        expert, suite, version, [target, self.folder / "CHANGELOG.md"], note
                    )
                    out["commit"] = {
                        "branch": commit_.branch,
                        "sha": commit_.sha,
                        "author": commit_.author,
                    }
                except GitError as exc:  # the file is saved; the commit is left to the expert
                    out["commit_error"] = str(exc)
            return out


def _originals(source: Path) -> dict[str, tuple[Any, str]]:
    """Each case of ``source`` by id: its JSON object and its line as written."""
    original: dict[str, tuple[Any, str]] = {}
    for _, line in iter_lines(source.read_text(encoding="utf-8", errors="replace")):
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            original.setdefault(obj["id"], (obj, line))
    return original


def _replace(target: Path, text: str) -> None:
    """A candidate file (``reports/candidates/``, outside the datasets folder) rewritten."""
    atomic_write_text(target, text)  # fsynced, one rename (app.safe_io)


def issues(result: CheckResult, lang: Lang = "en") -> list[dict[str, Any]]:
    return [issue(i, lang) for i in result.issues]


def issue(i: Any, lang: Lang = "en") -> dict[str, Any]:
    return {
        "line": i.line,
        "field": i.field,
        "label": label(i.field, lang),
        "message": i.message,
        "fix": i.fix,
        "severity": i.severity,
        "code": i.code,
    }
