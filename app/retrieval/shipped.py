"""Vectors shipped with the checkout: the sample KB and the shipped suites, embedded once.

A fresh clone has an empty vector cache (``.cache/embeddings``); without this, its first
hybrid run (``make eval``) would embed every chunk, title and question it ships before the
first request. ``app/retrieval/vectors/<key>.npz`` holds, per embedder key, the vectors of
every text the shipped suites' runs ask for (written by ``scripts/ship_vectors.py``):

* ``hashes`` — ``(n, 32)`` uint8: ``sha256(key \\0 side \\0 text)``, the vector cache's own
  content hash (:meth:`~app.retrieval.embed.CachedEmbedder._hash`), so a vector is found
  only for the same model, side and text;
* ``vectors`` — ``(n, dim)`` float32, the floats the model gives (not rounded: a shipped
  vector is bit-identical to one computed here, so scores and rankings are the same);
* ``meta`` — JSON (as uint8): ``format``, ``key``, ``dim``, ``count`` and ``sha256`` of
  ``hashes`` and ``vectors``' bytes.

Verified on load: a file that cannot be read, or whose key, shape or digest does not match,
is refused with one line on stderr naming the file, the reason and the regeneration command,
and the texts are embedded as if it were absent — never used silently.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.paths import PACKAGE_DIR

__all__ = ["FORMAT", "REGENERATE", "ShippedVectors", "shipped_dir", "shipped_path", "write"]

FORMAT = 1
REGENERATE = "python scripts/ship_vectors.py"

Vectors = npt.NDArray[np.float32]


def shipped_dir() -> Path:
    return PACKAGE_DIR / "retrieval" / "vectors"


def shipped_path(key: str, root: Path | None = None) -> Path:
    """The file for embedder ``key`` (its name made file-safe, plus a digest of the key)."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in key)[:120]
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    return (root or shipped_dir()) / f"{safe}-{digest}.npz"


def _digest(hashes: npt.NDArray[np.uint8], vectors: Vectors) -> str:
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(hashes).tobytes())
    h.update(np.ascontiguousarray(vectors).tobytes())
    return h.hexdigest()


def write(path: Path, key: str, rows: Mapping[str, Vectors]) -> int:
    """Write ``rows`` (content hash hex -> vector) for ``key`` to ``path``, sorted by hash
    (the same rows give the same bytes). Returns how many."""
    order = sorted(rows)
    if not order:
        raise ValueError("no vectors to ship")
    hashes = np.frombuffer(b"".join(bytes.fromhex(h) for h in order), dtype=np.uint8)
    hashes = hashes.reshape(len(order), 32)
    vectors = np.stack([np.asarray(rows[h], dtype=np.float32) for h in order])
    meta = {
        "format": FORMAT,
        "key": key,
        "dim": int(vectors.shape[1]),
        "count": len(order),
        "sha256": _digest(hashes, vectors),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(
        tmp,
        hashes=hashes,
        vectors=vectors,
        meta=np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8),
    )
    tmp.replace(path)
    return len(order)


class ShippedVectors:
    """The shipped vectors of one embedder key, read and verified on first use."""

    def __init__(self, key: str, path: Path | None = None) -> None:
        self.key = key
        self.path = path or shipped_path(key)
        self._rows: dict[str, Vectors] | None = None
        self._lock = threading.Lock()
        #: why the file was refused (None: accepted or absent)
        self.refused: str | None = None

    def _load(self) -> dict[str, Vectors]:
        if not self.path.is_file():
            return {}
        try:
            with np.load(self.path, allow_pickle=False) as data:
                meta = json.loads(bytes(data["meta"]).decode())
                hashes = np.asarray(data["hashes"], dtype=np.uint8)
                vectors = np.asarray(data["vectors"])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
            return self._refuse(f"unreadable ({exc.__class__.__name__})")
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            return self._refuse(f"format {meta.get('format') if isinstance(meta, dict) else '?'}")
        if meta.get("key") != self.key:
            return self._refuse(f"made for embedder {meta.get('key')!r}, not {self.key!r}")
        n = meta.get("count")
        if (
            vectors.dtype != np.float32
            or hashes.shape != (n, 32)
            or vectors.shape != (n, meta.get("dim"))
        ):
            return self._refuse("shape or type does not match its header")
        if _digest(hashes, vectors) != meta.get("sha256"):
            return self._refuse("checksum mismatch (the file was changed or is corrupt)")
        return {bytes(h).hex(): v for h, v in zip(hashes, vectors, strict=True)}

    def _refuse(self, why: str) -> dict[str, Vectors]:
        self.refused = why
        print(
            f"warning: shipped vectors {self.path} refused: {why} — embedding those texts "
            f"instead; regenerate the file with `{REGENERATE}`",
            file=sys.stderr,
            flush=True,
        )
        return {}

    def rows(self) -> dict[str, Vectors]:
        with self._lock:
            if self._rows is None:
                self._rows = self._load()
            return self._rows

    def find(self, hashes: Iterable[str]) -> dict[str, Vectors]:
        """The shipped vectors among ``hashes`` (content hash hex -> vector)."""
        rows = self.rows()
        if not rows:
            return {}
        return {h: rows[h] for h in hashes if h in rows}
