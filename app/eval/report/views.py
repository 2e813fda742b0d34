"""Lean views of the report records: ``msgspec`` structs derived from the pydantic models.

:mod:`app.eval.report.records` is the one source of a report's fields. A reader of many
cases (``rag eval compare``, the static HTML export) decodes each case's JSON into a frozen
``msgspec`` struct holding a subset of a record's fields — far less work than the pydantic
record. Those structs are not written by hand: :func:`view_of` builds one from the model's
fields at import (same names, same types, the same required fields and defaults, the same
bounds), for the fields it is told to keep, with each nested record replaced by its own view.
A field renamed or retyped in the records changes every view with it; a view naming a field
the record no longer has fails at import. Decoding is msgspec's, as for a hand-written struct.

The views of this module (the viewer derives its own from the trace records,
:mod:`app.view.stream`):

* :data:`LeanScore` / :data:`LeanCase` — :class:`~app.eval.scoring.base.Score` without
  ``detail``, :class:`~app.eval.report.records.CaseResult` without ``trace``;
* :data:`CompareScore` / :data:`CompareCase` — what ``rag eval compare`` reads.

For a type checker each view *is* the record it is cut from (a subset of its fields, under
the same names and types), so code reading a view is checked against the records.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Annotated, Any

import annotated_types
import msgspec
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.eval.report.records import CaseResult, Repeat, Sample
from app.eval.scoring.base import Score

__all__ = [
    "CompareCase",
    "CompareScore",
    "LeanCase",
    "LeanRepeat",
    "LeanSample",
    "LeanScore",
    "view_of",
]

# pydantic's bounds (``Field(ge=0)``) -> msgspec.Meta's
_BOUNDS: dict[type[Any], str] = {
    annotated_types.Ge: "ge",
    annotated_types.Gt: "gt",
    annotated_types.Le: "le",
    annotated_types.Lt: "lt",
    annotated_types.MinLen: "min_length",
    annotated_types.MaxLen: "max_length",
}


def _swap(tp: Any, nested: Mapping[type[BaseModel], type[msgspec.Struct]], where: str) -> Any:
    """``tp`` with every nested record replaced by its view (``dict[str, Score]`` ->
    ``dict[str, LeanScore]``); a record without a view is an error, never a silent copy."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if tp not in nested:
            raise TypeError(f"{where}: {tp.__name__} is a record with no view; pass nested=")
        return nested[tp]
    origin = typing.get_origin(tp)
    if origin is None:
        return tp
    args = typing.get_args(tp)
    if origin is Annotated:
        return Annotated[(_swap(args[0], nested, where), *args[1:])]
    if origin is typing.Literal:
        return tp
    swapped = tuple(_swap(a, nested, where) for a in args)
    if origin in (typing.Union, types.UnionType):
        return typing.Union[swapped]  # noqa: UP007 - built from a tuple of members
    return origin[swapped] if len(swapped) > 1 else origin[swapped[0]]


def _field(
    info: FieldInfo, tp: Any, where: str
) -> tuple[Any, Any]:  # (type, default or msgspec.NODEFAULT)
    bounds: dict[str, Any] = {}
    for meta in info.metadata:
        key = _BOUNDS.get(type(meta))
        if key is None:
            raise TypeError(f"{where}: no msgspec counterpart for the constraint {meta!r}")
        bounds[key] = getattr(meta, key)
    if bounds:
        tp = Annotated[tp, msgspec.Meta(**bounds)]
    if info.is_required():
        return tp, msgspec.NODEFAULT
    if info.default_factory is not None:
        return tp, msgspec.field(default_factory=info.default_factory)  # type: ignore[arg-type]
    if info.default is PydanticUndefined:  # pragma: no cover - required, handled above
        return tp, msgspec.NODEFAULT
    return tp, info.default


def view_of(
    model: type[BaseModel],
    name: str,
    *,
    fields: Collection[str] | None = None,
    exclude: Collection[str] = (),
    nested: Mapping[type[BaseModel], type[msgspec.Struct]] | None = None,
    methods: Mapping[str, Callable[..., Any]] | None = None,
    **options: Any,
) -> type[msgspec.Struct]:
    """A frozen ``msgspec`` struct named ``name`` with ``model``'s ``fields`` (default: all
    but ``exclude``), in the model's order, their types (nested records swapped for the views
    in ``nested``), required fields, defaults and bounds. Unknown JSON fields are ignored.
    ``methods`` go into the class; ``options`` are msgspec struct options (e.g. ``gc=False``,
    ``module``: the module the struct is said to be defined in)."""
    known = model.model_fields
    wanted = list(known) if fields is None else list(fields)
    missing = [f for f in [*wanted, *exclude] if f not in known]
    if missing:
        raise TypeError(
            f"view {name}: {model.__name__} has no field(s) {', '.join(missing)}; "
            f"its fields: {', '.join(known)}"
        )
    spec = []
    for field_name in (f for f in known if f in wanted and f not in exclude):
        where = f"view {name}: {model.__name__}.{field_name}"
        info = known[field_name]
        tp, default = _field(info, _swap(info.annotation, nested or {}, where), where)
        spec.append((field_name, tp) if default is msgspec.NODEFAULT else (field_name, tp, default))
    return msgspec.defstruct(
        name,
        spec,
        namespace=dict(methods or {}),
        frozen=True,
        **{"module": __name__, **options},
    )


if TYPE_CHECKING:
    # each view is, to a type checker, the record it is cut from (see the module docstring)
    LeanScore = Score
    LeanSample = Sample
    LeanRepeat = Repeat
    LeanCase = CaseResult
    CompareScore = Score
    CompareCase = CaseResult
else:
    LeanScore = view_of(Score, "LeanScore", exclude={"detail"}, gc=False)
    # a --repeat case's samples (app.eval.run.repeat): whole, they are compact already
    LeanSample = view_of(Sample, "LeanSample", gc=False)
    LeanRepeat = view_of(Repeat, "LeanRepeat", nested={Sample: LeanSample}, gc=False)
    LeanCase = view_of(
        CaseResult,
        "LeanCase",
        exclude={"trace"},
        nested={Score: LeanScore, Repeat: LeanRepeat},
        methods={"value": CaseResult.value},
        gc=False,
    )
    CompareScore = view_of(Score, "CompareScore", fields=("value", "reason"), gc=False)
    CompareCase = view_of(
        CaseResult,
        "CompareCase",
        fields=("id", "tags", "metrics", "answer", "refused", "outcome", "repeat"),
        nested={Score: CompareScore, Repeat: LeanRepeat},
        methods={"value": CaseResult.value},
        gc=False,
    )
