"""Structural invariants of ``app/``: no import cycle, no import from a floor above, public
faces complete, small modules.

The import graph is read statically (``ast``) and counts every import a module can run:

* ``import`` / ``from … import`` at module level **and inside function bodies** (a lazy
  import kept for start-up speed still runs, so it may neither close a cycle nor reach up);
* string imports: ``importlib.import_module("app.…")``, a ``"app.module:attr"`` reference,
  and, in a module that loads by name (it calls ``import_module``, ``__import__`` or
  :func:`app.faces.face_attr`), every string naming an ``app`` module — a lazy package face's
  ``_EXPORTS`` table, the CLI's command table;
* ``if TYPE_CHECKING:`` imports never run: they count for the floors (a type from above is
  knowledge of above) but not for cycles.

``from pkg import mod`` (``mod`` a module) imports ``pkg.mod``, not the face of ``pkg``;
importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[3] / "app"
FACES = [
    "app.llm",
    "app.generation.registry",
    "app.generation.pipeline",
    "app.text",
    "app.eval.compare",
    "app.eval.datasets",
    "app.eval.stats",
    "app.eval.scoring",
    "app.eval.report",
    "app.eval.run",
]
MAX_LINES = 600
# Modules still over the limit, each being split by its owner. An entry that is no longer
# over the limit fails the test below, so this list can only shrink.
KNOWN_LONG: set[str] = set()

# The floors of the house, lowest first: a module imports from its own floor or below,
# never from above. A name covers the module and everything under it; the longest name that
# covers a module decides its floor. Each floor is a concept's wing:
FLOORS: tuple[tuple[str, ...], ...] = (
    # the ground: errors, paths, limits, safe I/O, redaction, the one text analyser
    ("app", "app.errors", "app.paths", "app.limits", "app.safe_io", "app.redact",
     "app.runtime", "app.faces", "app.wellformed", "app.local_http", "app.text"),
    ("app.llm",),  # providers and their middleware: knows no pipeline, no harness
    ("app.retrieval",),  # the knowledge base, BM25 + dense, ACL filter
    ("app.generation",),  # the prompt registry and the RAG pipeline
    ("app.baselines",),  # offline providers: deterministic algorithms over the pipeline's texts
    ("app.ops",),  # the answer log the pipeline writes: its reader and shadow replay
    ("app.eval", "app.eval.config"),  # the harness, lowest wing first:
    ("app.eval.datasets",),
    ("app.eval.stats",),
    ("app.eval.scoring",),
    ("app.eval.report",),
    ("app.eval.run",),
    ("app.eval.compare",),
    ("app.integrations", "app.view"),  # front ends over reports
    ("app.cli", "app.__main__"),  # the `rag` command
)  # fmt: skip

# Imports that still run against the floors, each being removed by its owner (the offline
# baselines are to register their providers from above). Excluded from both graph tests; an
# entry that is gone fails the test below, so this list can only shrink.
PENDING: set[tuple[str, str]] = set()

LOADERS = {"import_module", "__import__", "face_attr"}
_MODULE_STRING = re.compile(r"app(?:\.\w+)+(?::\w+)?")

Kind = str  # "module" (module level), "function" (inside a function), "string", "type"
_STRENGTH = {"module": 0, "function": 1, "string": 2, "type": 3}  # an edge keeps the strongest


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _app_modules(root: Path = APP) -> dict[str, Path]:
    return {
        _module_name(p, root): p
        for p in root.rglob("*.py")
        if "prompts" not in p.relative_to(root).parts  # prompt modules are content, never imported
    }


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _ids_under(nodes: Iterable[ast.AST]) -> set[int]:
    return {id(m) for n in nodes for m in ast.walk(n)}


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def imports_of(
    tree: ast.Module, name: str, is_pkg: bool, modules: Iterable[str]
) -> dict[str, Kind]:
    """Every ``app`` module ``name`` may import, with how (the strongest way found)."""
    known = set(modules)
    type_only = _ids_under(
        b for n in ast.walk(tree) if isinstance(n, ast.If) and _is_type_checking(n) for b in n.body
    )
    in_function = _ids_under(
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
    )
    docstrings = {
        id(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    loads_by_name = any(isinstance(n, ast.Call) and _called(n) in LOADERS for n in ast.walk(tree))
    out: dict[str, Kind] = {}

    def add(target: str, kind: Kind) -> None:
        if target not in known or target == name:
            return
        if target not in out or _STRENGTH[kind] < _STRENGTH[out[target]]:
            out[target] = kind

    for node in ast.walk(tree):
        kind = (
            "type" if id(node) in type_only else "function" if id(node) in in_function else "module"
        )
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, kind)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            subs = [f"{mod}.{a.name}" for a in node.names]
            for sub in subs:
                add(sub, kind)  # `from pkg import module`
            if not all(sub in known for sub in subs):
                add(mod, kind)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings or not _MODULE_STRING.fullmatch(node.value):
                continue
            if ":" in node.value or loads_by_name:
                add(node.value.partition(":")[0], "string")
    return out


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    kind: Kind


def _edges(root: Path = APP, pending: set[tuple[str, str]] | None = None) -> list[Edge]:
    modules = _app_modules(root)
    skip = PENDING if pending is None else pending
    found: dict[tuple[str, str], Kind] = {}

    def add(key: tuple[str, str], kind: Kind) -> None:
        if key not in found or _STRENGTH[kind] < _STRENGTH[found[key]]:
            found[key] = kind

    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target, kind in imports_of(tree, name, path.name == "__init__.py", modules).items():
            if (name, target) in skip:
                continue
            add((name, target), kind)
            # importing a.b.c also runs a/__init__ and a/b/__init__
            parts = target.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if parent in modules and parent != name and not name.startswith(parent + "."):
                    add((name, parent), kind)
    return [Edge(s, t, k) for (s, t), k in sorted(found.items())]


def _graph(edges: Iterable[Edge]) -> dict[str, set[str]]:
    """The run-time graph: every edge but type-only imports."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        graph.setdefault(e.source, set())
        if e.kind != "type":
            graph[e.source].add(e.target)
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return [*stack[stack.index(dep) :], dep]
            if dep not in state and (found := dfs(dep)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := dfs(node)):
            return found
    return None


def floor_of(module: str, floors: tuple[tuple[str, ...], ...] = FLOORS) -> int | None:
    best: tuple[int, int] | None = None  # (length of the covering name, floor)
    for level, names in enumerate(floors):
        for covering in names:
            # "app" is the root package only: a new top-level module must be given a floor
            covers = module == covering or (covering != "app" and module.startswith(covering + "."))
            if covers and (best is None or len(covering) > best[0]):
                best = (len(covering), level)
    return None if best is None else best[1]


def upward(edges: Iterable[Edge], floors: tuple[tuple[str, ...], ...] = FLOORS) -> list[str]:
    """Every import of a module from a floor above its own."""
    out = []
    for e in edges:
        source, target = floor_of(e.source, floors), floor_of(e.target, floors)
        if source is not None and target is not None and target > source:
            out.append(
                f"{e.source} (floor {source}) imports {e.target} (floor {target}) [{e.kind}]"
            )
    return out


def _plant(root: Path, files: dict[str, str]) -> Path:
    app = root / "app"
    for rel, text in {"__init__.py": "", **files}.items():
        path = app / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return app


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) is None


def test_a_cycle_closed_by_a_function_level_or_string_import_is_found(tmp_path: Path) -> None:
    app = _plant(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/a.py": "from app.low.b import thing\n",
            "low/b.py": "def thing():\n    from app.low import a\n    return a\n",
            "up/__init__.py": "",
            "up/c.py": "import importlib\n\ndef load():\n    return importlib.import_module('app.up.d')\n",
            "up/d.py": "from app.up.c import load\n",
            "tc/__init__.py": "",
            "tc/e.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.tc.f import F\n",
            "tc/f.py": "from app.tc.e import TYPE_CHECKING\n",
        },
    )
    edges = _edges(app, pending=set())
    kinds = {(e.source, e.target): e.kind for e in edges}
    assert kinds[("app.low.b", "app.low.a")] == "function"
    assert kinds[("app.up.c", "app.up.d")] == "string"
    assert kinds[("app.tc.e", "app.tc.f")] == "type"
    graph = _graph(edges)
    assert _find_cycle({k: v for k, v in graph.items() if k.startswith("app.low")}) is not None
    assert _find_cycle({k: v for k, v in graph.items() if k.startswith("app.up")}) is not None
    assert _find_cycle({k: v for k, v in graph.items() if k.startswith("app.tc")}) is None


def test_a_planted_upward_import_breaks_the_floors(tmp_path: Path) -> None:
    """A function-level import, a string import, a type-only import and a package face's
    lazy table each reach a floor above; a downward import does not."""
    app = _plant(
        tmp_path,
        {
            "llm/__init__.py": "",
            "llm/a.py": "def f():\n    from app.eval.run import x\n",
            "llm/b.py": "TABLE = {'k': 'app.baselines.judge:Judge'}\n",
            "llm/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.eval.run import x\n",
            "llm/d.py": "from app.errors import E\n",
            "errors.py": "class E(Exception): ...\n",
            "text/__init__.py": (
                "from app.faces import face_attr\n_EXPORTS = {'Run': 'app.eval.run'}\n"
                "def __getattr__(n):\n    return face_attr(__name__, _EXPORTS, n)\n"
            ),
            "faces.py": "def face_attr(p, e, n): ...\n",
            "baselines/__init__.py": "",
            "baselines/judge.py": "class Judge: ...\n",
            "eval/__init__.py": "",
            "eval/run.py": "x = 1\n",
        },
    )
    found = upward(_edges(app, pending=set()))
    assert {
        "app.llm.a (floor 1) imports app.eval.run (floor 11) [function]",
        "app.llm.b (floor 1) imports app.baselines.judge (floor 4) [string]",
        "app.llm.c (floor 1) imports app.eval.run (floor 11) [type]",
        "app.text (floor 0) imports app.eval.run (floor 11) [string]",
    } <= set(found), found
    assert not [f for f in found if f.startswith("app.llm.d ")]  # llm -> errors is downward


def test_the_graph_sees_real_edges() -> None:
    kinds = {(e.source, e.target): e.kind for e in _edges()}
    assert kinds[("app.generation.pipeline.generator", "app.generation.registry")] == "module"
    assert kinds[("app.generation.registry", "app.errors")] == "module"
    assert kinds[("app.eval.run.workers", "app.eval.run.case")] == "function"
    assert kinds[("app.cli", "app.cli.eval")] == "string"  # the lazy command table
    assert kinds[("app.eval.report", "app.eval.report.io")] == "string"  # a lazy face


def test_no_import_cycle_in_app() -> None:
    cycle = _find_cycle(_graph(_edges()))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_every_module_in_app_has_a_floor() -> None:
    unplaced = sorted(m for m in _app_modules() if floor_of(m) is None)
    assert not unplaced, f"put these in a floor of FLOORS: {unplaced}"


def test_no_module_imports_from_a_floor_above() -> None:
    found = upward(_edges())
    assert not found, "imports from a floor above:\n" + "\n".join(found)


def test_pending_upward_imports_still_exist() -> None:
    present = {(e.source, e.target) for e in _edges(pending=set())}
    stale = sorted(PENDING - present)
    assert not stale, f"remove from PENDING (the import is gone): {stale}"


@pytest.mark.parametrize("face", FACES)
def test_every_name_in_all_exists(face: str) -> None:
    module = importlib.import_module(face)
    names = module.__all__
    assert names, f"{face}.__all__ is empty"
    assert len(set(names)) == len(names), f"{face}.__all__ has duplicates"
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing, f"{face}.__all__ names missing attributes: {missing}"


def test_no_module_in_app_over_600_lines() -> None:
    long = {
        str(p.relative_to(APP.parent)): n
        for p in _app_modules().values()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    new = {k: v for k, v in long.items() if k not in KNOWN_LONG}
    assert not new, f"modules over {MAX_LINES} lines: {new}"
    stale = sorted(k for k in KNOWN_LONG if k not in long)
    assert not stale, f"remove from KNOWN_LONG (now within {MAX_LINES} lines or gone): {stale}"


def test_the_cjk_ideograph_range_has_one_home() -> None:
    """``app.text.analyser.CJK_CLASS`` is the one spelling of "a CJK ideograph": three modules
    had their own, one of them narrower (safety's missed the compatibility block)."""
    import re

    spelled = re.compile(r"\\u4e00|\\u3400|\u4e00-|[\u3400]-")
    own = {
        str(path.relative_to(APP))
        for path in APP.rglob("*.py")
        if spelled.search(path.read_text(encoding="utf-8"))
    }
    assert own == {"text/analyser.py"}, own
