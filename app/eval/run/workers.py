"""Worker processes: a CPU-bound run on several cores (issue 14).

With the offline providers a run waits on nothing: the candidate, the judge, retrieval and
the metrics are Python computing in this process, so one process uses one core. A run whose
candidate and judge are both in-process (``offline:``) can be shared by ``--workers N``
processes. The default, ``auto``, starts one per 1,000 cases to run, at most one per core
and four (:func:`planned`): on 2 cores a 10,000-case offline run takes about 63 % of the
time (18.95 against 30.10 s, ``scripts/bench_scale.py``) for the memory of a second process
(its own heap; its own mapping of the embedding model when it embeds a query new to the vector
cache). With a network provider the run waits
on the network and one process serves it (its rate limits, cache claims and adaptive
concurrency are one process's), so ``--workers N > 1`` there is refused (exit 2).

How the work is shared:

* the main process keeps the cases to run in one queue; each worker process is fed
  :data:`BATCH` cases at a time, :data:`AHEAD` batches ahead, by a feeder thread, while the
  main process's own workers take cases from the same queue: whoever is free takes the next
  case, so the split follows the speed of each process;
* a worker process builds the same engine, pipeline and metric context from the run's
  configuration and evaluates its cases with the runner's own
  :class:`~app.eval.run.case.CaseRun`: each result is committed to the run's checkpoint (SQLite
  in WAL mode takes the two writers) with its engine counters under its own ``process:``
  key, exactly as a resumed process does; it sends back each case's :class:`~app.eval.report.summary.CaseDigest` (what the summary
  needs), so the main process never re-reads a result;
* the report is written by the main process from the checkpoint as always: the cases, the
  summary and every counter are those of one process running them all (the engine counters
  are the processes' sums, see :meth:`~app.llm.engine_stats.EngineStats.summed`);
* a worker that dies loses nothing: a case it was sent and never reported is read from the
  checkpoint if it got there, else run by the main process; Ctrl-C stops every process
  and ``--resume`` continues the run as after any kill.

The frames on the pipes are a 4-byte big-endian length and a pickle (both ends are this
code, in one run).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import queue
import secrets
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from app.errors import ConfigError
from app.eval.config import RunConfig
from app.runtime import peak_rss_mb

if TYPE_CHECKING:
    from app.eval.datasets.case import Case
    from app.eval.datasets.index import CaseQueue
    from app.eval.report.summary import CaseDigest, DigestTable
    from app.eval.run.checkpoint import Checkpoint
    from app.llm.batch import Batcher
    from app.llm.engine import Engine

log = logging.getLogger(__name__)

#: cases sent to a worker process at a time, and how many such batches it holds ahead
BATCH = 16
AHEAD = 2
#: ``--workers auto``: a process per this many cases to run, at most this many processes
AUTO_CASES = 1000
AUTO_MAX = 4
_HEADER = struct.Struct(">I")
#: the command of a worker process (empty: this interpreter, ``-m app.eval.run.workers``;
#: tests put a worker that dies here)
WORKER_COMMAND: tuple[str, ...] = ()


def in_process(config: RunConfig) -> bool:
    """Candidate and judge both compute in this process (their providers'
    :attr:`~app.llm.providers.base.Provider.in_process`: the ``offline:`` ones)."""
    from app.llm.providers import provider_flag

    refs = (config.model_ref, config.judge_ref) if config.judge_ref else (config.model_ref,)
    return all(provider_flag(r.require_provider(), "in_process") for r in refs)


def check(config: RunConfig) -> None:
    """ConfigError (exit 2) for ``--workers N > 1`` with a network provider (``auto`` is one
    process there)."""
    asked = config.workers
    if asked != "auto" and asked > 1 and not in_process(config):
        raise ConfigError(
            f"--workers {asked}: worker processes share CPU-bound work, and this run calls "
            f"a network provider ({config.model}"
            + (f", judge {config.judge}" if config.judge else "")
            + ") — it waits on the network, and rate limits, the cache and adaptive "
            "concurrency are one process's; drop --workers (or split the suite across machines "
            "with rag eval run --shard I/N)"
        )


def cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def planned(config: RunConfig, cases: int, *, own_engine: bool) -> int:
    """How many processes run ``cases`` cases (1: this one alone; :func:`check` has
    refused ``--workers N > 1`` for a network provider before).

    ``auto`` (the default): one process per :data:`AUTO_CASES` cases to run, at most one
    per core and :data:`AUTO_MAX` — a worker process costs about a second of start-up and
    its own memory (about 107 MB for the bench's 10,000 cases), which a few hundred offline
    cases do not earn back."""
    if not in_process(config) or not own_engine or config.batch:
        return 1
    if config.workers == "auto":
        return max(1, min(cores(), AUTO_MAX, cases // AUTO_CASES))
    return max(1, min(config.workers, cases))


def engine_for(config: RunConfig, batcher: Batcher | None = None) -> Engine:
    """The engine a run's process uses (every process of a run builds the same one)."""
    from app.llm.engine import Engine, EngineConfig

    return Engine(
        EngineConfig(
            concurrency=config.concurrency,
            cache=config.cache,
            refresh_cache=config.refresh_cache,
            refresh_answers=config.fresh_answers,
            rpm=config.rpm,
            tpm=config.tpm,
            timeout_s=config.timeout_s,
            max_attempts=config.max_attempts,
            max_throttled=2 * config.max_attempts,
            retry_budget=config.retry_budget,
        ),
        batcher=batcher,
    )


# --- frames --------------------------------------------------------------------------------


def _send(out: IO[bytes], obj: object) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(data)) + data)
    out.flush()


def _recv(inp: IO[bytes]) -> Any:
    """The next frame, or EOFError when the other end closed."""
    head = inp.read(_HEADER.size)
    if len(head) < _HEADER.size:
        raise EOFError
    size = _HEADER.unpack(head)[0]
    data = inp.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)  # our own process of this run wrote it


# --- the main process's side -------------------------------------------------------------


@dataclass
class _Child:
    proc: subprocess.Popen[bytes]
    sent: set[str] = field(default_factory=set)
    ahead: int = 0
    alive: bool = True
    ready: threading.Condition = field(default_factory=threading.Condition)
    #: the worker's last word: its provider calls and peak RSS (MB)
    calls: int = 0
    peak_rss_mb: float = 0.0


class Pool:
    """The run's worker processes, fed from the main process's queue ``pending``."""

    def __init__(self, pending: CaseQueue, hello: dict[str, Any], count: int) -> None:
        self.pending = pending
        self._digests: deque[CaseDigest] = deque()
        self._children: list[_Child] = []
        self._threads: list[threading.Thread] = []
        env = {**os.environ, "PYTHONUNBUFFERED": "0"}
        for _ in range(count):
            proc = subprocess.Popen(
                list(WORKER_COMMAND or (sys.executable, "-m", "app.eval.run.workers")),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                # its own process group: a Ctrl-C reaches the main process only, which
                # stops its workers (a worker interrupted mid-import would print a traceback)
                process_group=0,
            )
            child = _Child(proc)
            assert proc.stdin is not None
            _send(proc.stdin, hello)
            self._children.append(child)
            for target in (self._feed, self._read):
                thread = threading.Thread(target=target, args=(child,), daemon=True)
                thread.start()
                self._threads.append(thread)

    def _feed(self, child: _Child) -> None:
        stdin = child.proc.stdin
        assert stdin is not None
        try:
            while True:
                with child.ready:
                    while child.alive and child.ahead >= AHEAD:
                        child.ready.wait(0.5)
                    if not child.alive:
                        return
                batch: list[Case] = []
                while len(batch) < BATCH:
                    try:
                        batch.append(self.pending.popleft())
                    except IndexError:
                        break
                if not batch:
                    _send(stdin, None)  # no more: the worker finishes what it holds
                    stdin.close()
                    return
                with child.ready:
                    child.sent.update(c.id for c in batch)
                    child.ahead += 1
                _send(stdin, batch)
        except (BrokenPipeError, OSError, ValueError):  # the worker died: _read says so
            return

    def _read(self, child: _Child) -> None:
        stdout = child.proc.stdout
        assert stdout is not None
        try:
            while True:
                digests: list[CaseDigest] | dict[str, Any] = _recv(stdout)
                if isinstance(digests, dict):
                    child.calls = int(digests["calls"])
                    child.peak_rss_mb = float(digests["peak_rss_mb"])
                    continue
                with child.ready:
                    for d in digests:
                        child.sent.discard(d.id)
                    child.ahead -= 1
                    child.ready.notify()
                self._digests.extend(digests)
        except (EOFError, OSError, pickle.UnpicklingError):
            pass
        finally:
            with child.ready:
                child.alive = False
                child.ready.notify()

    def drain(self) -> list[CaseDigest]:
        """The digests the workers reported since the last call."""
        out = []
        while self._digests:
            out.append(self._digests.popleft())
        return out

    def join(self) -> set[str]:
        """Wait for every worker to finish; the ids of the cases they were sent and never
        reported (a worker that died)."""
        for thread in self._threads:
            thread.join()
        lost: set[str] = set()
        for child in self._children:
            code = child.proc.wait()
            if code != 0 or child.sent:
                log.warning(
                    "worker process %d exited with code %d; %d case(s) it held are taken "
                    "over by the main process",
                    child.proc.pid,
                    code,
                    len(child.sent),
                )
            lost |= child.sent
        return lost

    async def finish(self) -> set[str]:
        return await asyncio.to_thread(self.join)

    def calls(self) -> int:
        """The provider calls the worker processes made."""
        return sum(c.calls for c in self._children)

    def peak_rss_mb(self) -> tuple[float, ...]:
        """Each worker process's peak RSS (MB), as it reported it when it finished."""
        return tuple(c.peak_rss_mb for c in self._children)

    def close(self) -> None:
        """Stop every worker still running (an interrupted or failed run)."""
        for child in self._children:
            if child.proc.poll() is None:
                child.proc.kill()
            child.proc.wait()
            for pipe in (child.proc.stdin, child.proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()


def start(
    config: RunConfig,
    pending: CaseQueue,
    *,
    count: int,
    run_id: str,
    runs_root: Path | None,
    parent_key: str,
    bad_judge_score: float,
) -> Pool | None:
    """Start ``count - 1`` worker processes for the cases in ``pending`` (None for 1)."""
    if count <= 1:
        return None
    hello = {
        "config": config.to_json(),
        "run_id": run_id,
        "runs_root": str(runs_root) if runs_root is not None else None,
        "parent_key": parent_key,
        "bad_judge_score": bad_judge_score,
        "log_levels": {name: logging.getLogger(name).level for name in ("app", "app.generation")},
    }
    return Pool(pending, hello, count - 1)


# --- the worker process's side -----------------------------------------------------------


def _reader(inp: IO[bytes], into: queue.Queue[list[Case] | None]) -> None:
    try:
        while True:
            batch = _recv(inp)
            into.put(batch)
            if batch is None:
                return
    except EOFError:  # the main process went away: finish what is held, then stop
        into.put(None)


async def _serve(hello: dict[str, Any], inp: IO[bytes], out: IO[bytes]) -> None:
    from app.eval.run.case import CaseRun
    from app.eval.run.checkpoint import Checkpoint
    from app.eval.run.observe import PipelineFactory
    from app.eval.scoring.base import MetricContext
    from app.eval.scoring.table import specs

    config = RunConfig.from_json(hello["config"])
    root = Path(hello["runs_root"]) if hello["runs_root"] else None
    checkpoint = Checkpoint.open(hello["run_id"], root)
    checkpoint.commit_every = BATCH  # one transaction per batch (app.eval.run.checkpoint)
    engine = engine_for(config)
    factory = PipelineFactory(config, engine)
    base_ctx = MetricContext(k=config.k, chunk_acl=factory.chunk_acl(), canary=factory.canary())
    run_case = CaseRun(
        factory,
        engine,
        config,
        base_ctx,
        checkpoint,
        key=f"process:{secrets.token_hex(4)}",
        started=time.monotonic(),
        judge_metrics=sorted(n for n, spec in specs().items() if spec.kind == "judge"),
        bad_judge_score=float(hello["bad_judge_score"]),
        worker_of=hello["parent_key"],
    )
    batches: queue.Queue[list[Case] | None] = queue.Queue()
    threading.Thread(target=_reader, args=(inp, batches), daemon=True).start()
    try:
        while (batch := await asyncio.to_thread(batches.get)) is not None:
            todo: deque[Case] = deque(batch)
            done: list[CaseDigest] = []

            async def work(todo: deque[Case], done: list[CaseDigest]) -> None:
                while todo:
                    _, digested = await run_case(todo.popleft())
                    done.append(digested)
                    await asyncio.sleep(0)  # let a cancel (Ctrl-C) in: see the runner

            tasks = min(len(batch), 2 * config.concurrency)
            await asyncio.gather(*(work(todo, done) for _ in range(tasks)))
            checkpoint.flush()  # committed before the main process counts them
            _send(out, done)
        _send(out, {"calls": engine.stats.calls, "peak_rss_mb": round(peak_rss_mb(), 1)})
    finally:
        factory.close()
        await engine.aclose()
        checkpoint.close()


def main(argv: Sequence[str] | None = None) -> int:
    """A worker process: ``python -m app.eval.run.workers`` with frames on stdin/stdout."""
    from app.runtime import tune_gc

    tune_gc()  # the settings of the rag command whose run this process serves
    inp = sys.stdin.buffer
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not corrupt a frame
    try:
        hello = _recv(inp)
    except EOFError:
        return 1
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for name, level in hello.get("log_levels", {}).items():
        logging.getLogger(name).setLevel(level)
    try:
        asyncio.run(_serve(hello, inp, out))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the main process stopped listening
        return 1
    return 0


def absorb(pool: Pool | None, into: DigestTable, on_each: Callable[[CaseDigest], None]) -> None:
    """Move the digests ``pool`` reported into ``into`` (``on_each`` per digest)."""
    if pool is None:
        return
    for d in pool.drain():
        into[d.id] = d
        on_each(d)


def recover(
    lost: Iterable[str],
    checkpoint: Checkpoint,
    cases: Callable[[set[str]], Iterable[Case]],
    pending: CaseQueue,
    into: DigestTable,
    judge_metrics: Sequence[str],
    bad_judge_score: float,
    on_each: Callable[[CaseDigest], None],
) -> None:
    """The cases a dead worker was sent and never reported: digested from the checkpoint
    when it committed them, else read again (``cases(ids)``, in run order) and put back into
    ``pending`` to run here."""
    from app.eval.report.records import CaseResult
    from app.eval.report.summary import digest

    ids = set(lost)
    if not ids:
        return
    for text in checkpoint.rows(ids & checkpoint.ids()):
        result = CaseResult.model_validate_json(text)
        into[result.id] = found = digest(result, judge_metrics, bad_judge_score)
        on_each(found)
        ids.discard(result.id)
    if ids:
        pending.extend(cases(ids))


if __name__ == "__main__":
    sys.exit(main())
