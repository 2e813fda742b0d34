"""Process-wide settings of the ``rag`` command and the scripts that stand in for it.

Not applied on import: a program that uses ``app`` as a library keeps its own settings.
"""

from __future__ import annotations

import gc

# Objects allocated (net of those freed) between two youngest-generation collections.
# CPython's default, 700, made an 800-case ``rag eval run`` collect about 550 times: each
# collection walks the objects of the cases in flight (messages, retrieval scores, records)
# and promotes them, and the older generations then walk them again, ~0.6 s of GC per run,
# ~0.3 ms per provider call (scripts/bench_bareloop.py). With 10,000: ~0.15 s. Cyclic
# garbage waits a little longer (10,000 objects at most, about a megabyte); objects freed
# by reference counting, nearly all of them, never wait for the collector.
GEN0_THRESHOLD = 10_000


def tune_gc() -> None:
    """Raise the youngest generation's collection threshold to :data:`GEN0_THRESHOLD`.

    A threshold set higher already (or a disabled collector) is left as it is; the older
    generations keep their thresholds.
    """
    gen0, gen1, gen2 = gc.get_threshold()
    if gen0 and gen0 < GEN0_THRESHOLD:
        gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)


def peak_rss_mb() -> float:
    """This process's own peak resident set size, in MB.

    On Linux the kernel's high-water mark of this process's memory (``VmHWM``): the
    ``ru_maxrss`` of ``getrusage`` is carried over an ``exec`` — a worker process started
    by a 190 MB main process reports at least 190 MB there, whatever it used itself. Where
    ``/proc`` is missing, ``ru_maxrss`` (kB on Linux, bytes on macOS)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def freeze_gc() -> None:
    """Move every object the collector tracks now to its permanent generation
    (:func:`gc.freeze`), for a process about to end: the interpreter's collections at exit
    then walk none of them (the imported modules' classes, schemas and caches, the run's
    records). Objects are not changed;
    ``atexit`` handlers, open files and the exit code are not affected. Cyclic garbage left
    at that point is not collected before the process ends (its memory goes with it)."""
    gc.freeze()
