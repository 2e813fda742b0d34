"""The prompt registry: the public face of loading, checking and rendering prompt modules.

::

    reg = load_registry()                  # app/generation/prompts, cached per root
    spec = reg.get("system/kb_qa")         # active version (releases.toml, RAG_PROMPT_PIN)
    spec = reg.get("system/kb_qa_v2")      # an exact version
    rp = render("system/kb_qa", model="anthropic:claude-sonnet-4-6", variables={...})
    req = rp.to_request(temperature=0.0)   # app.llm.types.ChatRequest

The pieces: :mod:`loader` (static ``ast`` parsing), :mod:`checks` + :mod:`rules` (the
violation codes), :mod:`contracts` (variables per category), :mod:`releases` (active /
fallback / lock / pins), :mod:`render` + :mod:`chat_formats`.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.errors import ConfigError, PromptError
from app.generation.registry.checks import check_changed_since, check_module, check_tree
from app.generation.registry.header import Baseline, ChangeEntry, PromptHeader
from app.generation.registry.loader import LoadedModule, PromptSpec, discover, load_module
from app.generation.registry.releases import (
    LOCK_FILE,
    Release,
    Releases,
    parse_pins,
    read_lock,
    read_releases,
    released,
)
from app.generation.registry.render import RenderedPrompt, render_spec
from app.generation.registry.rollout import Arm, arm_for
from app.generation.registry.rules import RULES, Violation
from app.llm.spec import ModelRef
from app.llm.types import Message
from app.safe_io import is_dir

__all__ = [
    "RULES",
    "Baseline",
    "ChangeEntry",
    "PromptHeader",
    "PromptRegistry",
    "PromptSpec",
    "RenderedPrompt",
    "Violation",
    "check_registry",
    "default_root",
    "load_registry",
    "render",
]

_NAME_RE = re.compile(r"^(?P<pid>[a-z][a-z0-9_]*/[a-z][a-z0-9_]*?)(?:_v(?P<v>[1-9][0-9]*))?$")


def default_root() -> Path:
    return Path(__file__).resolve().parent.parent / "prompts"


@dataclass
class PromptRegistry:
    """Everything under one prompts root, loaded statically."""

    root: Path
    modules: list[LoadedModule]
    releases: Releases
    lock: dict[str, str]
    _specs: dict[str, dict[int, PromptSpec]] = field(default_factory=dict)
    lock_problem: str | None = None  # prompts.lock could not be read (reported as P025)

    def __post_init__(self) -> None:
        for mod in self.modules:
            if mod.spec is not None:
                self._specs.setdefault(mod.spec.prompt_id, {})[mod.spec.version] = mod.spec

    # -- lookup ----------------------------------------------------------------------------
    def prompt_ids(self) -> list[str]:
        return sorted(self._specs)

    def versions(self, prompt_id: str) -> dict[int, PromptSpec]:
        return dict(sorted(self._specs.get(prompt_id, {}).items()))

    def release(self, prompt_id: str) -> Release | None:
        """The prompt's ``releases.toml`` entry (a single-version prompt needs none)."""
        return released(self.releases, prompt_id, self._specs.get(prompt_id, {}))

    def active_version(self, prompt_id: str) -> int:
        """The pinned (``RAG_PROMPT_PIN``), else active (``releases.toml``), else latest version."""
        versions = self._specs.get(prompt_id)
        if not versions:
            raise PromptError(
                f"unknown prompt {prompt_id!r}; known prompts: {', '.join(self.prompt_ids())}"
            )
        pinned = parse_pins().get(prompt_id)
        if pinned is not None:
            if pinned not in versions:
                raise PromptError(
                    f"RAG_PROMPT_PIN pins {prompt_id}=v{pinned} but only "
                    f"{[f'v{v}' for v in sorted(versions)]} exist"
                )
            return pinned
        rel = self.release(prompt_id)
        if rel is not None and rel.active is not None and rel.active in versions:
            return rel.active
        return max(versions)

    def choose(self, prompt_id: str, subject: str | None) -> tuple[PromptSpec, Arm]:
        """The version ``prompt_id`` serves to ``subject`` (a user or session id) and its arm:
        ``pinned`` (``RAG_PROMPT_PIN``), ``candidate`` (in a rollout's share of users) or
        ``control`` (the active version); see :mod:`app.generation.registry.rollout`."""
        versions = self._specs.get(prompt_id)
        if versions and prompt_id in parse_pins():
            return versions[self.active_version(prompt_id)], "pinned"
        arm, version = arm_for(self.release(prompt_id), subject)
        if versions and version is not None and version in versions:
            return versions[version], arm
        return self.get(prompt_id), "control"

    def arms_for(
        self, prompt_ids: Iterable[str], subject: str | None
    ) -> tuple[dict[str, PromptSpec], dict[str, Any]]:
        """For the prompts under a rollout or a pin among ``prompt_ids``: the version each
        serves ``subject``, and the answer log's ``user``, ``arm`` (``candidate`` when any
        prompt served its candidate, ``pinned`` under a pin) and ``arms`` fields."""
        specs: dict[str, PromptSpec] = {}
        arms: dict[str, dict[str, str]] = {}
        pins = parse_pins()
        for prompt_id in prompt_ids:
            rel = self.release(prompt_id)
            if (rel is None or rel.rollout is None) and prompt_id not in pins:
                continue
            spec, arm = self.choose(prompt_id, subject)
            specs[prompt_id] = spec
            arms[prompt_id] = {"arm": arm, "version": spec.qualified}
        chosen = {a["arm"] for a in arms.values()}
        overall = next((a for a in ("pinned", "candidate") if a in chosen), "control")
        return specs, {"user": subject, "arm": overall, "arms": arms}

    def get(self, name: str) -> PromptSpec:
        """``system/kb_qa`` (active version) or ``system/kb_qa_v2`` (exact version)."""
        m = _NAME_RE.match(name.strip().removesuffix(".py"))
        if m is None:
            raise PromptError(
                f"{name!r} is not a prompt name; use <category>/<slug> or <category>/<slug>_v<N>"
            )
        pid, ver = m.group("pid"), m.group("v")
        versions = self._specs.get(pid)
        if versions is None and ver is None:
            raise PromptError(
                f"unknown prompt {pid!r}; known prompts: {', '.join(self.prompt_ids())}"
            )
        if ver is None:
            return self._specs[pid][self.active_version(pid)]
        spec = (versions or {}).get(int(ver))
        if spec is None:
            known = [s.qualified for s in (versions or {}).values()]
            raise PromptError(
                f"unknown prompt version {pid}_v{ver}; known versions: {known or 'none'}"
            )
        return spec

    def specs(self) -> list[PromptSpec]:
        return [s for pid in self.prompt_ids() for s in self.versions(pid).values()]

    def module(self, spec: PromptSpec) -> LoadedModule:
        return next(m for m in self.modules if m.spec is spec)

    # -- checking --------------------------------------------------------------------------
    def check(self, changed_since: str | None = None) -> list[Violation]:
        """Every violation in the tree (modules, releases, lock; optionally the change)."""
        out: list[Violation] = []
        for mod in self.modules:
            out += mod.violations
        tree = check_tree(self.modules, self.releases, self.lock)
        if self.lock_problem is not None:  # no lock to compare with: one P025, not many P017
            tree = [v for v in tree if v.code != "P017"]
            tree.append(Violation("P025", LOCK_FILE, None, self.lock_problem))
        out += tree
        if changed_since is not None:
            out += check_changed_since(self.root, changed_since, self.modules, self.lock)
        return sorted(out, key=lambda v: (v.file, v.line or 0, v.code))

    # -- rendering -------------------------------------------------------------------------
    def render(
        self,
        name: str,
        *,
        model: str | ModelRef,
        variables: Mapping[str, Any] | None = None,
        history: Sequence[Message | Mapping[str, str]] | None = None,
        chat_format: str = "auto",
        allow_unlisted: bool = False,
    ) -> RenderedPrompt:
        """Render ``name`` for ``model``. The library's one adapter from a model *string*:
        a ``str`` is parsed here, once (:func:`app.llm.providers.families.parse_model`);
        everything inward (:func:`render_spec`, the pipeline, the judges) takes the parsed
        :class:`ModelRef`."""
        if isinstance(model, str):
            from app.llm.providers.families import parse_model

            model = parse_model(model)
        return render_spec(
            self.get(name),
            model=model,
            variables=variables,
            history=history,
            chat_format=chat_format,
            allow_unlisted=allow_unlisted,
        )


def build_registry(root: Path) -> PromptRegistry:
    """Load and check a prompts tree from disk (no caching)."""
    root = Path(os.path.realpath(root))  # Path.resolve raises on a symlink loop
    if not is_dir(root):
        raise PromptError(f"prompts root {root} is not a directory — give --root the prompts tree")
    paths = discover(root)
    if not paths:
        raise PromptError(
            f"prompts root {root} holds no <category>/<slug>_v<N>.py module — give --root the "
            "prompts tree (default: app/generation/prompts)"
        )
    modules = []
    for path in paths:
        mod = load_module(path, root)
        check_module(mod)
        modules.append(mod)
    lock_problem: str | None = None
    try:
        lock = read_lock(root)
    except ConfigError as exc:
        lock, lock_problem = {}, str(exc)
    return PromptRegistry(root, modules, read_releases(root), lock, lock_problem=lock_problem)


_CACHE: dict[Path, PromptRegistry] = {}
_LOCK = threading.Lock()


def load_registry(root: Path | None = None, *, reload: bool = False) -> PromptRegistry:
    """The registry of ``root`` (default: the shipped library), cached per resolved root."""
    key = Path(os.path.realpath(root or default_root()))
    with _LOCK:
        if reload or key not in _CACHE:
            _CACHE[key] = build_registry(key)
        return _CACHE[key]


def check_registry(root: Path | None = None, changed_since: str | None = None) -> list[Violation]:
    return build_registry(root or default_root()).check(changed_since)


def render(
    name: str,
    *,
    model: str | ModelRef,
    variables: Mapping[str, Any] | None = None,
    history: Sequence[Message | Mapping[str, str]] | None = None,
    chat_format: str = "auto",
    root: Path | None = None,
) -> RenderedPrompt:
    """Render the named prompt (active version unless ``_v<N>`` is given) for ``model``."""
    return load_registry(root).render(
        name, model=model, variables=variables, history=history, chat_format=chat_format
    )
