"""The prompt review checklist of seed 004 Appendix B, computed instead of ticked by hand.

For every prompt module changed since a git revision, :func:`review_changes` answers:

===========================  ==========================================================
versioned file name          ``<slug>_v<N>.py`` and ``VERSION`` agree (no P001/P021)
complete header              docstring header with author + date, change summary and
                             an evaluation baseline (no P002/P003/P004/P022/P029)
declared models              ``APPLICABLE_MODELS`` non-empty and on the header (P005/P006)
fixtures passing             3–5 well-formed fixtures (P007/P008), each renders for the
                             first declared model (the live answer check is
                             ``rag prompts test NAME -m MODEL``)
delta table attached         a comparison (``--delta FILE``, markdown or JSON from
                             ``rag eval compare/diff-prompt``) that names this version
refusal/citation/anti-halluc QA prompts: refusal wording + ``REJECTION_ANSWER`` (P011/P012),
                             a citation instruction (``[n]``/引用/cite), an
                             only-the-references instruction; other categories: n/a
user input isolated          every placeholder sits inside an XML-style tag pair
no released version edited   no P023 since the revision
no regression                the attached delta has no ❌ row
===========================  ==========================================================

Each item is ✅, ❌, ⚠️ (unverified) or ➖ (not applicable) with a one-line reason. A delta table
that no model measured (its candidate or judge an offline baseline: the table's headline
"unverified: no model ran") proves nothing about the prompt: "delta table attached" and "no
regression" are ⚠️ unverified, and the prompt's verdict is "⚠️ unverified: no model ran",
never "ready" (exit 1, as for ❌).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from app.errors import PromptError

Status = Literal["pass", "fail", "n/a", "unverified"]
ICON = {"pass": "✅", "fail": "❌", "n/a": "➖", "unverified": "⚠️"}
#: the headline of a delta table no model measured (app.eval.compare.table.UNVERIFIED)
UNVERIFIED = "unverified: no model ran"

_CITATION = re.compile(r"\[n\]|\[1\]|\[\d+\]|引用|出处|来源编号|cite|citation|source number", re.I)
_GROUNDING = re.compile(
    r"仅使用|只使用|仅根据|只根据|仅依据|只依据|不要使用预训练|不要编造|不得编造|不要推测"
    r"|only (use|the|from|on)|based (only|solely)|do not (make up|invent|guess|use prior)"
    r"|don't (make up|invent)",
    re.I,
)
_TAG_PAIR = re.compile(r"<([^\s<>/]+)>(.*?)</\1>", re.S)
_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")


@dataclass(frozen=True)
class CheckItem:
    name: str
    status: Status
    detail: str = ""

    @property
    def icon(self) -> str:
        return ICON[self.status]


@dataclass(frozen=True)
class PromptReview:
    qualified: str
    file: str
    items: tuple[CheckItem, ...]

    @property
    def passed(self) -> bool:
        return all(i.status not in ("fail", "unverified") for i in self.items)

    @property
    def verdict(self) -> str:
        if any(i.status == "fail" for i in self.items):
            return "❌ not ready"
        if any(i.status == "unverified" for i in self.items):
            return f"⚠️ {UNVERIFIED}"
        return "✅ ready for review"


@dataclass(frozen=True)
class Review:
    rev: str
    prompts: tuple[PromptReview, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return all(p.passed for p in self.prompts)

    def to_markdown(self) -> str:
        if not self.prompts:
            return f"No prompt module changed since `{self.rev}`.\n"
        lines: list[str] = []
        for p in self.prompts:
            lines += [f"#### `{p.qualified}` ({p.file}) — {p.verdict}", ""]
            lines += ["| check | | detail |", "|---|---|---|"]
            lines += [f"| {i.name} | {i.icon} | {i.detail} |" for i in p.items]
            lines.append("")
        lines += [f"<sub>{n}</sub>" for n in self.notes]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, object]:
        return {
            "rev": self.rev,
            "passed": self.passed,
            "prompts": [
                {
                    "qualified": p.qualified,
                    "file": p.file,
                    "passed": p.passed,
                    "verdict": p.verdict,
                    "items": [
                        {"name": i.name, "status": i.status, "detail": i.detail} for i in p.items
                    ],
                }
                for p in self.prompts
            ],
        }


# ---------------------------------------------------------------- helpers


def _codes(violations: Iterable[object], codes: Sequence[str]) -> list[str]:
    out = []
    for v in violations:
        code = getattr(v, "code", "")
        if code in codes:
            out.append(f"{code} {getattr(v, 'message', '')}".strip())
    return out


def _item(name: str, problems: Sequence[str], ok: str) -> CheckItem:
    if problems:
        return CheckItem(name, "fail", "; ".join(problems))
    return CheckItem(name, "pass", ok)


def isolated_placeholders(template: str) -> tuple[list[str], list[str]]:
    """(placeholders inside an XML-style tag pair, placeholders outside any)."""
    spans = [(m.start(2), m.end(2)) for m in _TAG_PAIR.finditer(template)]
    inside, outside = [], []
    for m in _PLACEHOLDER.finditer(template):
        name = m.group(1)
        if any(a <= m.start() and m.end() <= b for a, b in spans):
            inside.append(name)
        else:
            outside.append(name)
    return inside, outside


def _load_deltas(paths: Sequence[Path]) -> list[tuple[Path, str]]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(q for q in p.rglob("*") if q.suffix in (".md", ".json"))
        elif p.exists():
            files.append(p)
        else:
            raise PromptError(f"--delta {p}: no such file or directory")
    return [(f, f.read_text(encoding="utf-8")) for f in files]


@dataclass(frozen=True)
class Delta:
    path: Path
    regression: bool  # a ❌ row
    unverified: bool  # no model measured it (offline candidate or judge)


def _delta_for(qualified: str, deltas: Sequence[tuple[Path, str]]) -> Delta | None:
    """The delta that names ``qualified``: whether it shows a regression, whether a model
    measured it."""
    for path, text in deltas:
        if qualified not in text:
            continue
        if path.suffix == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError:
                continue
            unverified = data.get("headline") == UNVERIFIED or bool(data.get("unverified"))
            return Delta(path, bool(data.get("has_regression")), unverified)
        table = [line for line in text.splitlines() if line.startswith("| ")]
        return Delta(path, any("❌" in line for line in table), UNVERIFIED in text)
    return None


# ---------------------------------------------------------------- the review


def review_module(
    mod: object,
    *,
    all_violations: Sequence[object],
    deltas: Sequence[tuple[Path, str]],
) -> PromptReview:
    """The checklist for one loaded module (``app.generation.registry.loader.LoadedModule``)."""
    from app.generation.registry.loader import LoadedModule, fixture_variables
    from app.generation.registry.render import render_spec

    assert isinstance(mod, LoadedModule)
    mine = [v for v in all_violations if getattr(v, "file", None) == mod.rel]
    spec = mod.spec
    qualified = f"{mod.category}/{mod.slug}_v{mod.version}"
    items: list[CheckItem] = []
    items.append(
        _item("versioned file name", _codes(mine, ("P001", "P021")), f"{Path(mod.rel).name}")
    )
    header_problems = _codes(mine, ("P002", "P003", "P004", "P022", "P029"))
    header = mod.header
    if header is not None and not header_problems:
        if header.author is None or header.author.date is None:
            header_problems.append("no author with a date (创建人: name (YYYY-MM-DD))")
        if not header.changes:
            header_problems.append("no change summary (变更摘要)")
        if not header.baselines:
            header_problems.append("no evaluation baseline (评测基线)")
    items.append(_item("complete header", header_problems, "author, date, changes, baseline"))
    model_problems = _codes(mine, ("P005", "P006"))
    models = spec.applicable_models if spec is not None else ()
    if spec is not None and not models:
        model_problems.append("APPLICABLE_MODELS is empty")
    items.append(_item("declared models", model_problems, ", ".join(models)))

    fixture_problems = _codes(mine, ("P007", "P008"))
    if spec is not None and not fixture_problems and models:
        from app.llm.providers.families import parse_model

        # a model the prompt file declares (a bare id or family:model): read here, once
        model = parse_model(models[0] if "*" not in models[0] else "offline:extractive")
        for i, fx in enumerate(spec.test_fixtures, start=1):
            try:
                render_spec(spec, model=model, variables=fixture_variables(spec, fx))
            except PromptError as exc:
                fixture_problems.append(f"fixture #{i} does not render: {exc}")
    n_fx = len(spec.test_fixtures) if spec is not None else 0
    items.append(
        _item("fixtures passing", fixture_problems, f"{n_fx} fixtures valid and rendering")
    )

    delta = _delta_for(qualified, deltas)
    first = mod.version == 1 and delta is None
    if first:
        items.append(CheckItem("delta table attached", "n/a", "v1: no previous version"))
    elif delta is None:
        items.append(
            CheckItem(
                "delta table attached",
                "fail",
                f"no comparison naming {qualified}: run `rag eval diff-prompt` and pass --delta",
            )
        )
    elif delta.unverified:
        items.append(
            CheckItem(
                "delta table attached",
                "unverified",
                f"{delta.path}: {UNVERIFIED} (offline baseline): run `rag eval diff-prompt` "
                "with --model and --judge",
            )
        )
    else:
        items.append(CheckItem("delta table attached", "pass", str(delta.path)))

    if spec is None:
        items.append(CheckItem("refusal / citation / anti-hallucination", "fail", "no spec"))
    elif spec.contract is not None and spec.contract.qa:
        text = f"{spec.system_prompt or ''}\n{spec.user_template}"
        problems = _codes(mine, ("P011", "P012"))
        if not spec.rejection_answer:
            problems.append("no REJECTION_ANSWER")
        if not _CITATION.search(text):
            problems.append("no citation instruction ([n] / 引用 / cite)")
        if not _GROUNDING.search(text):
            problems.append("no anti-hallucination instruction (仅使用参考资料 / only use)")
        items.append(_item("refusal / citation / anti-hallucination", problems, "all present"))
    else:
        items.append(
            CheckItem("refusal / citation / anti-hallucination", "n/a", f"{mod.category} prompt")
        )

    if spec is None:
        items.append(CheckItem("user input isolated in XML tags", "fail", "no spec"))
    else:
        _, outside = isolated_placeholders(spec.user_template)
        if outside:
            items.append(
                CheckItem(
                    "user input isolated in XML tags",
                    "fail",
                    "outside any <tag>…</tag>: " + ", ".join(f"{{{n}}}" for n in outside),
                )
            )
        else:
            items.append(CheckItem("user input isolated in XML tags", "pass", "all placeholders"))

    items.append(
        _item("no released version edited in place", _codes(mine, ("P023",)), "not edited")
    )
    if first:
        items.append(CheckItem("no regression", "n/a", "v1: nothing to regress from"))
    elif delta is None:
        items.append(CheckItem("no regression", "fail", "unknown: no delta table"))
    elif delta.regression:
        items.append(CheckItem("no regression", "fail", f"❌ rows in {delta.path}"))
    elif delta.unverified:
        items.append(
            CheckItem("no regression", "unverified", f"{UNVERIFIED}: no ❌ proves nothing")
        )
    else:
        items.append(CheckItem("no regression", "pass", "no ❌ in the delta table"))
    ruler = _codes(mine, ("P024",))
    if ruler:
        items.append(CheckItem("judge not moved with the judged", "fail", "; ".join(ruler)))
    return PromptReview(qualified=qualified, file=mod.rel, items=tuple(items))


def review_changes(rev: str, *, root: Path | None = None, deltas: Sequence[Path] = ()) -> Review:
    """The checklist for every prompt module changed since ``rev``."""
    from app.generation.registry import build_registry, default_root
    from app.generation.registry.checks import changed_files

    reg = build_registry(root or default_root())
    changed, _ = changed_files(reg.root, rev)
    violations = reg.check(changed_since=rev)
    loaded = _load_deltas(deltas)
    reviews = [
        review_module(m, all_violations=violations, deltas=loaded)
        for m in sorted(reg.modules, key=lambda m: m.rel)
        if m.rel in changed
    ]
    notes = (
        "Computed by `rag prompts review` (seed 004 Appendix B). Fixtures are checked for "
        "shape and rendering; their expected phrases need a model: `rag prompts test NAME -m M`.",
    )
    return Review(rev=rev, prompts=tuple(reviews), notes=notes)
