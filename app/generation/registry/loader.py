"""Static loading of prompt modules: ``ast`` only, a prompt module is never imported or run.

A module may hold a docstring and assignments of literals (strings, numbers, booleans,
None, lists/tuples/dicts/sets of literals, and ``+`` concatenation of string literals).
Anything else at module level is a side effect and becomes violation P018 with its line.
"""

from __future__ import annotations

import ast
import hashlib
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from app.generation.registry.contracts import (
    FIXTURE_ALIASES,
    FIXTURE_META_KEYS,
    Contract,
    contract_for,
)
from app.generation.registry.header import PromptHeader, parse_header
from app.generation.registry.rules import Violation
from app.limits import limit
from app.safe_io import UnsafeInput, decode, read_bytes

FILE_RE = re.compile(r"^(?P<slug>[a-z][a-z0-9_]*?)_v(?P<version>[1-9][0-9]*)\.py$")
_NOT_LITERAL = object()


class _NotLiteral(Exception):
    def __init__(self, node: ast.AST, reason: str = "") -> None:
        super().__init__(type(node).__name__)
        self.node = node
        self.reason = reason


def _literal(node: ast.AST, depth: int = 0) -> Any:
    """Evaluate a literal expression, or raise :class:`_NotLiteral` naming the node.

    Iterative over ``+`` chains and bounded in nesting (``prompt_concat_terms`` /
    ``prompt_nesting`` in :mod:`app.limits`), so a 1,000-term concatenation or a deep list
    is a violation, never a RecursionError; an unhashable dict key or set item too."""
    if depth > limit("prompt_nesting"):
        raise _NotLiteral(node, f"nested more than {limit('prompt_nesting')} levels deep")
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_literal(e, depth + 1) for e in node.elts]
        if isinstance(node, ast.Set):
            _hashable(node, items)
        return items if isinstance(node, ast.List) else tuple(items)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise _NotLiteral(node)
        keys = [_literal(k, depth + 1) for k in node.keys if k is not None]
        _hashable(node, keys)
        values = [_literal(v, depth + 1) for v in node.values]
        return dict(zip(keys, values, strict=True))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        terms: list[ast.expr] = []
        cur: ast.expr = node
        while isinstance(cur, ast.BinOp) and isinstance(cur.op, ast.Add):
            terms.append(cur.right)
            cur = cur.left
            if len(terms) >= limit("prompt_concat_terms"):
                raise _NotLiteral(
                    node, f"more than {limit('prompt_concat_terms')} '+' terms; write one string"
                )
        parts = [_literal(t, depth + 1) for t in [cur, *reversed(terms)]]
        if all(isinstance(p, str) for p in parts):
            return "".join(parts)
        raise _NotLiteral(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand, depth + 1)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return -value
    raise _NotLiteral(node)


def _hashable(node: ast.AST, items: list[Any]) -> None:
    for item in items:
        try:
            hash(item)
        except TypeError:
            kind = "dict key" if isinstance(node, ast.Dict) else "set item"
            raise _NotLiteral(
                node, f"a {kind} is a {type(item).__name__}, which cannot be one"
            ) from None


_CONVERSIONS = (None, "r", "s", "a")


def _spec_problem(field_name: str, spec: str) -> str | None:
    """Why ``format(str, spec)`` would fail at render time (or allocate absurdly), if it would."""
    sizes = [int(n) for n in re.findall(r"\d+", spec)]
    if any(n > limit("prompt_format_width") for n in sizes):
        return (
            f"format spec {{{field_name}:{spec}}} asks for a width/precision over "
            f"{limit('prompt_format_width'):,}"
        )
    try:
        format("x", spec)
    except (ValueError, TypeError, OverflowError) as exc:
        return f"format spec {{{field_name}:{spec}}} fails for a text value ({exc})"
    return None


def placeholders(template: str) -> tuple[set[str], list[str]]:
    """Names used by a ``str.format`` template, and problems (positional, attribute, syntax)."""
    names: set[str] = set()
    problems: list[str] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        return names, [f"not a valid str.format template ({exc})"]
    for _literal_text, field_name, spec, conv in parsed:
        if field_name is None:
            continue
        if conv not in _CONVERSIONS:
            problems.append(f"conversion !{conv} in {{{field_name}}} is not one of !r !s !a")
        if field_name == "" or field_name.isdigit():
            problems.append(f"positional placeholder {{{field_name}}}")
        elif not field_name.isidentifier():
            problems.append(f"placeholder {{{field_name}}} is not a plain name")
        else:
            names.add(field_name)
        if spec and "{" in spec:
            problems.append(f"nested placeholder in format spec of {{{field_name}}}")
        elif spec:
            problem = _spec_problem(field_name, spec)
            if problem:
                problems.append(problem)
    return names, problems


@dataclass(frozen=True)
class PromptSpec:
    """One version of one prompt, as parsed from its module (frozen)."""

    category: str
    slug: str
    version: int
    path: Path
    system_prompt: str | None
    user_template: str
    variables: frozenset[str]
    applicable_models: tuple[str, ...]
    test_fixtures: tuple[Mapping[str, Any], ...]
    rejection_trigger_keywords: tuple[str, ...]
    rejection_answer: str | None
    canary: str | None
    content_hash: str
    header: PromptHeader
    defaults: Mapping[str, str] = field(default_factory=dict)
    response_format: str = "text"
    contract: Contract | None = None

    @property
    def prompt_id(self) -> str:
        return f"{self.category}/{self.slug}"

    @property
    def name(self) -> str:
        return f"{self.slug}_v{self.version}"

    @property
    def qualified(self) -> str:
        return f"{self.category}/{self.slug}_v{self.version}"

    @property
    def purpose(self) -> str:
        return self.contract.purpose if self.contract else "other"


@dataclass
class LoadedModule:
    """The result of statically loading one file: constants, violations and maybe a spec."""

    path: Path
    rel: str
    category: str
    slug: str
    version: int
    source: str
    content_hash: str
    constants: dict[str, Any] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    docstring: str | None = None
    docstring_line: int = 1
    header: PromptHeader | None = None
    violations: list[Violation] = field(default_factory=list)
    spec: PromptSpec | None = None

    def add(self, code: str, line: int | None, message: str) -> None:
        self.violations.append(Violation(code, self.rel, line, message))


def fixture_variables(spec: PromptSpec, fixture: Mapping[str, Any]) -> dict[str, Any]:
    """The template variables a fixture fills (``context_excerpt`` fills ``context``); meta
    keys such as ``expected_phrases`` are left out unless the template uses that name."""
    out: dict[str, Any] = {}
    for key, value in fixture.items():
        name = FIXTURE_ALIASES.get(key, key)
        if name in spec.variables or key not in FIXTURE_META_KEYS:
            out[name] = value
    return out


def content_hash(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def discover(root: Path) -> list[Path]:
    """Every ``<category>/*.py`` under root (sorted), including badly named ones and ones
    that are not regular files (a FIFO, a loop, a directory: :func:`load_module` reports
    them as P028 instead of skipping them silently)."""
    return sorted(p for p in root.glob("*/*.py") if p.name != "__init__.py")


def _str_tuple(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def load_module(path: Path, root: Path) -> LoadedModule:
    """Parse one prompt module statically; never raises on bad content."""
    rel = path.relative_to(root).as_posix()
    unreadable: UnsafeInput | None = None
    try:  # FIFOs, devices, loops, directories and over-size files are refused unread
        data = read_bytes(path, max_bytes=limit("prompt_file_bytes"), what="prompt module")
        decode(data, rel)
    except UnsafeInput as exc:
        unreadable = exc
        data = b"" if exc.line is None else data
    source = data.decode("utf-8", errors="replace")
    m = FILE_RE.match(path.name)
    mod = LoadedModule(
        path=path,
        rel=rel,
        category=path.parent.name,
        slug=m.group("slug") if m else path.stem,
        version=int(m.group("version")) if m else 0,
        source=source,
        content_hash=content_hash(data),
    )
    if m is None:
        mod.add("P021", None, f"file name {path.name!r} is not <slug>_v<N>.py")
    if unreadable is not None:
        mod.add("P028", unreadable.line, unreadable.problem)
        if unreadable.line is None:  # nothing was read
            return mod
    try:
        tree = ast.parse(source, filename=rel)
    except SyntaxError as exc:
        mod.add("P000", exc.lineno, f"syntax error: {exc.msg}")
        return mod
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, absurd nesting
        reason = "nested too deeply to parse" if not isinstance(exc, ValueError) else str(exc)
        mod.add("P000", None, f"does not parse: {reason}")
        return mod

    body = list(tree.body)
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        mod.docstring = first.value.value
        mod.docstring_line = first.lineno  # the text starts on the line of the opening quotes
        body = body[1:]
    for stmt in body:
        _load_statement(mod, stmt)
    if m is not None:
        _build_spec(mod)
    return mod


def _load_statement(mod: LoadedModule, stmt: ast.stmt) -> None:
    if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
        return
    target: ast.expr | None = None
    value: ast.expr | None = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target, value = stmt.target, stmt.value
    if not isinstance(target, ast.Name) or value is None:
        mod.add("P018", stmt.lineno, f"module-level {type(stmt).__name__} statement is not allowed")
        return
    try:
        mod.constants[target.id] = _literal(value)
    except _NotLiteral as exc:
        line = getattr(exc.node, "lineno", stmt.lineno)
        what = exc.reason or f"a {type(exc.node).__name__} expression, not a literal"
        mod.add("P018", line, f"{target.id} is assigned {what}")
        return
    mod.lines[target.id] = stmt.lineno


def _build_spec(mod: LoadedModule) -> None:
    """Build the spec from the constants; type problems become P020 violations."""
    c = mod.constants
    ok = True

    def need(name: str, kind: str, good: bool) -> None:
        nonlocal ok
        if not good:
            ok = False
            problem = "is missing" if name not in c else f"must be {kind}"
            mod.add("P020", mod.lines.get(name), f"{name} {problem}")

    need("VERSION", "a string", isinstance(c.get("VERSION"), str))
    need("USER_TEMPLATE", "a string", isinstance(c.get("USER_TEMPLATE"), str))
    need(
        "APPLICABLE_MODELS", "a list of strings", _str_tuple(c.get("APPLICABLE_MODELS")) is not None
    )
    fixtures = c.get("TEST_FIXTURES")
    need("TEST_FIXTURES", "a list", isinstance(fixtures, list | tuple))
    if "SYSTEM_PROMPT" in c:
        need(
            "SYSTEM_PROMPT",
            "a string or None",
            c["SYSTEM_PROMPT"] is None or isinstance(c["SYSTEM_PROMPT"], str),
        )
    for name in ("REJECTION_TRIGGER_KEYWORDS", "VARIABLES"):
        if name in c:
            need(name, "a list of strings", _str_tuple(c[name]) is not None)
    for name in ("REJECTION_ANSWER", "CANARY"):
        if name in c:
            need(name, "a string", isinstance(c[name], str))
    defaults = c.get("DEFAULTS", {})
    if "DEFAULTS" in c:
        need(
            "DEFAULTS",
            "a dict of strings",
            isinstance(defaults, dict) and all(isinstance(v, str) for v in defaults.values()),
        )
    if "RESPONSE_FORMAT" in c:
        need("RESPONSE_FORMAT", '"text" or "json"', c["RESPONSE_FORMAT"] in ("text", "json"))

    if mod.docstring is not None:
        mod.header = parse_header(mod.docstring, mod.docstring_line)
    if not ok:
        return
    system = c.get("SYSTEM_PROMPT")
    user = c["USER_TEMPLATE"]
    names: set[str] = set()
    for const, template in (("SYSTEM_PROMPT", system), ("USER_TEMPLATE", user)):
        if template is None:
            continue
        found, problems = placeholders(template)
        names |= found
        for problem in problems:
            mod.add("P019", mod.lines.get(const), f"{const}: {problem}")
    mod.spec = PromptSpec(
        category=mod.category,
        slug=mod.slug,
        version=mod.version,
        path=mod.path,
        system_prompt=system,
        user_template=user,
        variables=frozenset(names),
        applicable_models=tuple(c["APPLICABLE_MODELS"]),
        test_fixtures=tuple(
            MappingProxyType(dict(f)) if isinstance(f, dict) else f for f in c["TEST_FIXTURES"]
        ),
        rejection_trigger_keywords=tuple(c.get("REJECTION_TRIGGER_KEYWORDS", ())),
        rejection_answer=c.get("REJECTION_ANSWER"),
        canary=c.get("CANARY"),
        content_hash=mod.content_hash,
        header=mod.header or PromptHeader(),
        defaults=MappingProxyType(dict(defaults)),
        response_format=c.get("RESPONSE_FORMAT", "text"),
        contract=contract_for(mod.category, mod.slug),
    )
