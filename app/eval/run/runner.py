"""The evaluation runner: cases → pipeline → judges → metrics → checkpoint → report.

The report's meta records what the numbers were measured against (``git`` with untracked
content, the knowledge base's fingerprint, the datasets' hashes, each prompt's content hash
and the retriever as resolved: :mod:`app.eval.run.provenance`).

* async over cases through the :class:`~app.llm.engine.Engine` middleware (cache,
  retries, limits, cost); ``concurrency`` bounds the provider requests in flight (what a
  rate limit sees), and twice as many cases are worked on at once so those slots stay busy
  while a case does its own work between calls;
* order-independent: a case's result depends only on the case (no shared mutable state
  between cases; the report sorts cases by id);
* every finished case is committed to the run's SQLite checkpoint
  (:mod:`app.eval.run.checkpoint`) before the next one is counted, so ``resume=RUN_ID``
  finishes the rest without a single repeated provider call (an all-offline run commits
  :data:`CHECKPOINT_GROUP` cases at a time: a SIGKILL there re-computes at most that many,
  for CPU only, with the same results);
* ``max_cost`` stops starting new cases once the money spent so far reaches it (calls
  paid by this process, plus the recorded cost of cases checkpointed by an earlier one;
  cache hits are free); the report is then written with ``partial: true``. A case's
  ``cost_usd`` is what its calls are worth at list price, cached or not, so reports of the
  same work compare equal.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.errors import ConfigError, DatasetError
from app.eval.config import RunConfig, parse_shard
from app.eval.datasets.case import Case, Suite, load_suite
from app.eval.datasets.index import CaseIndex, CaseQueue
from app.eval.report.summary import CaseDigest, DigestTable, SummaryParts, digest, summary_parts
from app.eval.run import workers
from app.eval.run.case import CaseRun, process_stats, summed_stats
from app.eval.run.checkpoint import Checkpoint
from app.eval.run.observe import PipelineFactory
from app.eval.scoring.base import MetricContext
from app.eval.scoring.judges import check_judge, weak_judge
from app.eval.scoring.table import select_metrics, specs
from app.eval.scoring.thresholds import load_thresholds
from app.llm.engine import EngineStats
from app.llm.types import EngineLike
from app.paths import kb_dir, repo_root, reports_dir

# the report's records, its writer and the run's provenance are imported when the report is
# built (the first request leaves without them: the loop waits on the network by then)
if TYPE_CHECKING:
    from app.eval.report.records import (
        CaseResult,
        FrontEnd,
        PromptRef,
        Report,
        ReportSummary,
        Totals,
    )

log = logging.getLogger(__name__)

#: finished cases per checkpoint transaction in an all-offline run (app.eval.run.checkpoint)
CHECKPOINT_GROUP = 32


def _batcher(config: RunConfig) -> Any:
    """The batcher for ``--batch`` (None without it); refuses a run it cannot help."""
    if not config.batch:
        return None
    from app.errors import ConfigError
    from app.llm.batch import BatchConfig, Batcher

    refs = [r for r in (config.model_ref, config.judge_ref) if r is not None]
    if not any(Batcher.handles(r.require_provider()) for r in refs):
        raise ConfigError(
            "--batch: neither the model nor the judge has a batch API (anthropic:, openai:); "
            "the offline baselines answer at once — drop --batch"
        )
    if not config.cache:
        raise ConfigError(
            "--batch needs the response cache (batch results land there and --resume reads "
            "them): drop --no-cache"
        )
    return Batcher(
        BatchConfig(
            poll_initial_s=config.batch_poll_s,
            flush_idle_s=config.batch_flush_s,
            deadline_s=config.batch_timeout_s,
        )
    )


@dataclass
class RunOutcome:
    """A run's result. ``summary`` is the report without its cases; the run does not keep
    its cases in memory (they are in the checkpoint and the written file), so
    :attr:`report` reads the written report on first use (``write=False``: the runner
    reads the checkpoint into it before closing)."""

    run_id: str
    # not in the repr: asyncio.run's clean-up formats the finished task's result (to restore
    # the SIGINT handler), and a summary's repr grows with the cases (≈ 14 ms for 800)
    summary: ReportSummary = field(repr=False)
    path: Path | None
    markdown: Path | None
    calls: int = 0  # provider calls this process made (cache hits excluded)
    already_finished: bool = False  # --resume of a finished run: nothing run, nothing written
    full: Report | None = field(default=None, repr=False)
    #: each worker process's peak RSS in MB (a CPU-bound run's extra processes, see
    #: app.eval.run.workers); the main process's own is its getrusage
    worker_rss_mb: tuple[float, ...] = ()

    @property
    def report(self) -> Report:
        """The full report, cases included (read from ``path`` the first time)."""
        if self.full is None:
            if self.path is None:
                raise ValueError("this run wrote no report and kept no cases")
            from app.eval.report.io import load_report

            self.full = load_report(self.path)
        return self.full

    @property
    def exit_code(self) -> int:
        return 0 if self.summary.status == "pass" else 1


@dataclass
class _Progress:
    total: int
    done: int = 0
    errors: int = 0
    cost: float = 0.0
    on_update: Callable[[_Progress], None] | None = None
    started: float = field(default_factory=time.monotonic)

    def update(self, result: CaseResult, spent: float) -> None:
        self.count(bool(result.errors), spent)

    def count(self, errors: bool, spent: float) -> None:
        self.done += 1
        self.errors += 1 if errors else 0
        self.cost = spent
        if self.on_update is not None:
            self.on_update(self)


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{secrets.token_hex(3)}"


def open_run_dataset(config: RunConfig) -> CaseIndex:
    """The run's dataset: ``--dataset FILE`` or the suite (newest unless ``--dataset-version``),
    checked first like ``rag datasets check`` against the run's KB (an error is exit 2),
    line by line: what the run keeps is the index of the valid cases
    (:class:`~app.eval.datasets.index.CaseIndex`), each case read again when it is taken."""
    from app.eval.datasets.check import check_paths

    if config.dataset_path:
        path = Path(config.dataset_path)
    else:
        path = load_suite(config.suite, config.dataset_version).path
    kb_root = Path(config.kb_path) if config.kb_path else None
    result = check_paths([path], kb_root=kb_root)
    # a file given with --dataset may have any name: the <name>_v<x.y> rule is the suites'
    errors = [i for i in result.errors if not (config.dataset_path and i.code == "file-name")]
    if errors or result.fatal:
        shown = "\n".join(i.format() for i in errors[:20])
        more = f"\n… and {len(errors) - 20} more" if len(errors) > 20 else ""
        raise DatasetError(
            f"{path}: the dataset does not pass `rag datasets check`:\n{shown}{more}"
        )
    index: CaseIndex | None = result.loaded.get(os.path.realpath(path))
    if index is None and len(result.loaded) == 1:  # found in the datasets folder by name
        (index,) = result.loaded.values()
    if index is None:
        raise DatasetError(f"{path}: the dataset could not be read")
    return index


def load_run_dataset(config: RunConfig) -> Suite:
    """:func:`open_run_dataset` with every case read (a caller that needs the cases)."""
    return open_run_dataset(config).suite()


def select_cases(suite: Suite, limit: int | None, shard: str | None = None) -> list[Case]:
    """The run's cases, by id: the first ``limit``, then this shard's part of them."""
    cases = sorted(suite.cases, key=lambda c: c.id)
    cases = cases[:limit] if limit is not None else cases
    if shard is None:
        return cases
    index, count = parse_shard(shard)
    return [c for c in cases if shard_of(c.id, count) == index]


def select_positions(index: CaseIndex, limit: int | None, shard: str | None = None) -> list[int]:
    """:func:`select_cases` on the index: the positions of the run's cases, in file order."""
    if shard is None:
        return index.select(limit)
    part, count = parse_shard(shard)
    return index.select(limit, lambda case_id: shard_of(case_id, count) == part)


def shard_of(case_id: str, count: int) -> int:
    """The shard (1-based) a case belongs to: stable by case id, whatever else the suite
    holds, so adding a case never moves another one to a different shard."""
    digest = hashlib.sha256(case_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


async def run(
    config: RunConfig,
    *,
    resume: str | None = None,
    engine: EngineLike | None = None,
    out_dir: Path | None = None,
    command: Sequence[str] = (),
    front_end: FrontEnd = "api",
    on_progress: Callable[[_Progress], None] | None = None,
    runs_root: Path | None = None,
    case_order: Callable[[list[Case]], list[Case]] | None = None,
    write: bool = True,
    run_id: str | None = None,
) -> RunOutcome:
    """Run (or resume) a suite and write its report. See the module docstring."""
    from app.llm.engine import Engine

    started = time.monotonic()
    checkpoint: Checkpoint | None = None
    if resume:
        checkpoint = Checkpoint.open(resume, runs_root)
        config = RunConfig.from_json(checkpoint.config())
        run_id = resume
    run_id = run_id or new_run_id()
    own: Engine | None = None  # the engine this call made (and closes)
    try:
        # everything that can be wrong with the input fails here, before any case runs
        warnings = (
            check_judge(config.model_ref, config.judge_ref, allow_weak=config.allow_weak_judge)
            if config.judge_ref is not None
            else []
        )
        select_metrics(config.metrics)  # an unknown --metrics name fails here (exit 2)
        workers.check(config)  # --workers N with a network provider
        suite = open_run_dataset(config)
        chosen = select_positions(suite, config.limit, config.shard)
        ids = [suite.ids[i] for i in chosen]  # the run's cases, in file order
        planned = min(config.limit, len(suite)) if config.limit is not None else len(suite)
        if checkpoint is not None and (done := _finished_outcome(checkpoint, run_id, ids)):
            return done  # resuming a finished run: say so, write nothing
        thresholds = load_thresholds(
            config.suite, Path(config.thresholds_path) if config.thresholds_path else None
        )
        if unknown := sorted(set(thresholds.items) - set(specs())):
            raise ConfigError(
                f"{thresholds.path}: threshold(s) {', '.join(unknown)} name no metric; "
                f"the metrics are {', '.join(specs())}"
            )
        batcher = _batcher(config)
        if engine is None:  # no network yet: the engine connects on its first call
            engine = own = workers.engine_for(config, batcher)
        eng: EngineLike = engine
        factory = PipelineFactory(config, eng)
        # every prompt the run may render, before any provider call (the languages of the
        # multi-turn cases: those are read for it)
        factory.preflight(suite.read(i for i in chosen if suite.multi_turn[i]))
        if isinstance(eng, Engine):  # a missing API key fails now, not at case 1
            for ref in (config.model_ref, config.judge_ref):
                if ref is not None:
                    eng.provider(ref.require_provider())
        fresh = checkpoint is None  # a checkpoint this run makes holds nothing yet
        if checkpoint is None:  # opened by a thread while the first cases start
            checkpoint = Checkpoint.create(run_id, config.to_json(), runs_root, background=True)
        if workers.in_process(config):  # a case costs CPU only (and comes out the same)
            checkpoint.commit_every = CHECKPOINT_GROUP
        base_ctx = MetricContext(k=config.k, chunk_acl=factory.chunk_acl(), canary=factory.canary())
        process_key = f"process:{secrets.token_hex(4)}"
        earlier = (
            []
            if fresh
            else [process_stats(p) for p in checkpoint.processes(except_key=process_key)]
        )
        earlier_s = (
            0.0
            if fresh
            else sum(float(p.get("duration_s", 0.0) or 0.0) for p in checkpoint.processes())
        )
        judges = sorted(n for n, spec in specs().items() if spec.kind == "judge")
        bar = thresholds.bad_judge_score
        run_case = CaseRun(
            factory, eng, config, base_ctx, checkpoint, process_key, started, judges, bar
        )
        # what the summary needs of each finished case; the results themselves stay in the
        # checkpoint (a 10,000-case run never holds them all)
        finished = (
            DigestTable()
            if fresh
            else DigestTable.of(digest(result, judges, bar) for _, result in checkpoint.results())
        )
        todo = [i for i in chosen if suite.ids[i] not in finished]
        progress = _Progress(total=len(chosen), on_update=on_progress)
        progress.done = len(chosen) - len(todo)
        spent_before = sum(finished.cost(i) for i in ids if i in finished)
        engine_spent_at_start = _spent(eng)
        progress.cost = spent_before
        if on_progress is not None:
            on_progress(progress)
        calls_before = _calls(eng)
        stop_reason: str | None = None
        # the cases are read from the file as they are taken (a 100,000-case run holds the
        # ones in flight); case_order (tests) reorders them, all read first
        pending = CaseQueue(
            iter(case_order(list(suite.read(todo)))) if case_order is not None else suite.read(todo)
        )
        count = workers.planned(config, len(todo), own_engine=own is not None)
        if count > 1:  # the workers read their query vectors instead of each loading the model
            factory.prefetch_queries(suite.questions(todo))
            checkpoint.ready()  # and open the checkpoint's file themselves
        pool = workers.start(
            config,
            pending,
            count=count,
            run_id=run_id,
            runs_root=runs_root,
            parent_key=process_key,
            bad_judge_score=bar,
        )

        by_workers = [0.0]  # what the worker processes' cases cost

        def reported(d: CaseDigest) -> None:  # a case a worker process finished
            by_workers[0] += d.cost_usd
            progress.count(d.has_errors, progress.cost + d.cost_usd)

        async def worker() -> None:
            nonlocal stop_reason
            while True:
                if config.max_cost is not None and progress.cost >= config.max_cost:
                    stop_reason = stop_reason or (
                        f"--max-cost {config.max_cost:g} USD reached (spent {progress.cost:.4f})"
                    )
                    return
                workers.absorb(pool, finished, reported)
                try:
                    case = pending.popleft()
                except IndexError:
                    return
                result, finished[case.id] = await run_case(case)
                spent = spent_before + _spent(eng) - engine_spent_at_start + by_workers[0]
                progress.update(result, spent)
                del result  # not held while other cases run (a 10,000-case run never holds all)
                # an offline case never suspends: without this a Ctrl-C (a cancel) would wait
                # for the whole queue
                await asyncio.sleep(0)

        try:
            # with --batch every case is in flight at once, so their calls share batches
            tasks = len(todo) if config.batch else 2 * config.concurrency
            await ramp(worker, max(1, tasks))
            if pool is not None:  # the workers' last cases; a dead worker's are run here
                lost = await pool.finish()
                workers.absorb(pool, finished, reported)
                workers.recover(
                    lost,
                    checkpoint,
                    lambda wanted: suite.read(i for i in todo if suite.ids[i] in wanted),
                    pending,
                    finished,
                    judges,
                    bar,
                    reported,
                )
                await ramp(worker, max(1, tasks))
                earlier = [process_stats(p) for p in checkpoint.processes(process_key)]
        finally:
            if pool is not None:
                pool.close()
            calls = _calls(eng) - calls_before + (pool.calls() if pool is not None else 0)
            factory.close()  # the warm cache: prunes entries unused for 30 days
            if own is not None:
                await own.aclose()
                own = None
        rss = pool.peak_rss_mb() if pool is not None else ()
        wanted = set(ids)
        results = (  # what the checkpoint holds beyond the run's cases stays out
            finished
            if all(i in wanted for i in finished.ids)
            else DigestTable.of(finished[i] for i in ids if i in finished)
        )
        del wanted
        parts = summary_parts(results, specs(), config.seed)
        done_ids = set(results.ids)
        finished.clear()  # what the summary needed of the cases: gone before the report
        results.clear()
        if stop_reason is None and len(done_ids) < len(ids):
            stop_reason = f"{len(ids) - len(done_ids)} case(s) not run"
        from app.eval.report.io import build_summary, write_report_rows
        from app.eval.report.records import (
            CandidateInfo,
            CaseResult,
            DatasetRef,
            JudgeInfo,
            Report,
            RunMeta,
            ShardInfo,
            ThresholdsRef,
        )
        from app.eval.run.provenance import content_dirs, git_state, kb_ref

        kb_root = Path(config.kb_path) if config.kb_path else kb_dir()
        meta = RunMeta(
            git=git_state(watched=content_dirs(suite.path, kb_root)),
            command=list(command),
            front_end=front_end,
            suite=suite.name,
            seed=config.seed,
            k=config.k,
            resumed_from=resume,
            candidate=CandidateInfo(provider=config.model, offline=config.model_ref.offline),
            judge=JudgeInfo(
                provider=config.judge,
                offline=config.judge_ref.offline if config.judge_ref is not None else None,
                samples=config.judge_samples if config.judge else 0,
                temperature=0.0,
                allow_weak=config.allow_weak_judge,
                weak=bool(
                    config.judge_ref is not None and weak_judge(config.model_ref, config.judge_ref)
                ),
                warnings=warnings,
                prompts=_refs(factory.judge_prompt_refs()) if config.judge else {},
            ),
            prompts=_refs(factory.prompt_refs_of(parts.prompt_versions)),
            datasets=[
                DatasetRef(
                    name=suite.name,
                    version=suite.version,
                    sha256=suite.sha256,
                    path=_rel(suite.path),
                    cases=len(suite),
                )
            ],
            thresholds=ThresholdsRef(
                path=_rel(thresholds.path),
                version=thresholds.version,
                sha256=thresholds.sha256,
                suite=thresholds.suite,
                bad_judge_score=thresholds.bad_judge_score,
            ),
            config=config,
            retrieval=factory.retriever_info(),
            kb=kb_ref(factory.kb, _rel(kb_root)),
            unlisted_models=factory.unlisted(
                [*factory.prompt_refs_of(parts.prompt_versions), *factory.judge_prompt_refs()]
                if config.allow_unlisted_model
                else []
            ),
            shard=None
            if config.shard is None
            else ShardInfo(
                index=parse_shard(config.shard)[0],
                count=parse_shard(config.shard)[1],
                cases=len(ids),
                planned=planned,
            ),
        )
        summary = build_summary(
            run_id=run_id,
            created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            meta=meta,
            metric_specs=specs(),
            parts=parts,
            thresholds=thresholds,
            totals=totals(
                parts,
                len(ids),
                earlier_s + time.monotonic() - started,
                summed_stats(eng, earlier),
            ),
            partial_reason=stop_reason,
            measured=select_metrics(config.metrics),
        )
        cp = checkpoint
        if not write:  # nothing written: the caller gets the cases from the checkpoint
            full = Report(
                **dict(summary),
                cases=[CaseResult.model_validate_json(row) for row in cp.rows(done_ids)],
            )
            return RunOutcome(run_id, summary, None, None, calls, full=full, worker_rss_mb=rss)
        # the cases go from the checkpoint to the file as they were stored (already
        # validated and checked for NaN when saved), never all in memory at once
        path, md = write_report_rows(summary, lambda: cp.rows(done_ids), out_dir or reports_dir())
        checkpoint.set("report", str(path))
        return RunOutcome(run_id, summary, path, md, calls, worker_rss_mb=rss)
    finally:
        if own is not None:
            await own.aclose()
        if checkpoint is not None:
            checkpoint.close()


async def ramp(start: Callable[[], Awaitable[None]], count: int) -> None:
    """Run ``count`` copies of ``start()`` at once, started one event-loop turn apart: the
    loop polls its sockets between two starts, so the first case's request leaves as soon
    as its own work is done, not after every other case in flight has done its own (a case's
    pipeline runs until its first provider call without yielding). Ends when all have ended;
    the first exception propagates as from :func:`asyncio.gather`."""
    tasks: list[asyncio.Future[None]] = []
    try:
        for _ in range(count):
            tasks.append(asyncio.ensure_future(start()))
            await asyncio.sleep(0)  # one loop turn: the started copy runs to its first await
    except BaseException:  # cancelled while starting: the started copies go with it
        for task in tasks:
            task.cancel()
        raise
    await asyncio.gather(*tasks)


def totals(
    parts: SummaryParts, planned: int, duration_s: float, engine: EngineStats | None
) -> Totals:
    """The run's counts and costs (judge cost: what the judge samples recorded)."""
    from app.eval.report.records import Totals

    judge_cost, total_cost = parts.judge_cost_usd, parts.cost_usd
    return Totals(
        cases_planned=planned,
        cases_done=parts.cases_done,
        cases_with_errors=parts.cases_with_errors,
        cases_unstable=parts.cases_unstable,
        judge_errors=parts.judge_errors,  # judge samples that failed (not answer errors)
        cost_usd=round(total_cost, 8),
        candidate_cost_usd=round(max(total_cost - judge_cost, 0.0), 8),
        judge_cost_usd=round(judge_cost, 8),
        duration_s=round(duration_s, 3),
        engine=engine,
    )


def _refs(refs: dict[str, dict[str, str | None]]) -> dict[str, PromptRef]:
    from app.eval.report.records import PromptRef

    return {pid: PromptRef(version=str(r["version"]), hash=r["hash"]) for pid, r in refs.items()}


def _rel(path: Path) -> str:
    """``path`` relative to the repository root (a link inside the root, such as a KB
    folder linked in, is shown where it is linked), else as given."""
    root = repo_root()
    for candidate in (Path(os.path.abspath(path)), path.resolve()):
        try:
            return candidate.relative_to(root).as_posix()
        except ValueError:
            continue
    return str(path)


def _spent(engine: object) -> float:
    """Money this process's engine has spent (cache hits excluded)."""
    stats = getattr(engine, "stats", None)
    return float(getattr(stats, "cost_usd", 0.0) or 0.0) if stats is not None else 0.0


def _calls(engine: object) -> int:
    stats = getattr(engine, "stats", None)
    return int(getattr(stats, "calls", 0)) if stats is not None else 0


def _finished_outcome(checkpoint: Checkpoint, run_id: str, ids: Sequence[str]) -> RunOutcome | None:
    """The outcome of a run that already finished (every case done, its report on disk)."""
    stored = checkpoint.get("report")
    if not stored or not Path(stored).is_file():
        return None
    done = checkpoint.ids()
    if any(i not in done for i in ids):
        return None
    from app.eval.report.io import load_report

    path = Path(stored)
    md = path.with_suffix(".md")
    report = load_report(path)
    return RunOutcome(run_id, report, path, md if md.is_file() else None, 0, True, full=report)


def run_sync(config: RunConfig, **kw: Any) -> RunOutcome:
    """:func:`run` from synchronous code (the CLI and pytest front ends)."""
    return asyncio.run(run(config, **kw))
