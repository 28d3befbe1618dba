"""The gallery's search structure: a FAISS inner-product index derived from the records.

    index = VectorIndex(dim, "flat")
    index.add(ids, vectors); index.remove(ids)          # removal: a tombstone
    scores, ids = index.search(queries, k)
    index.save(folder / "images", header); VectorIndex.load(folder / "images", header)

The records (``groundsearch.index.records``) are the truth; this index only answers
"which ids are nearest". It remembers how far it has read the records (``last_id``: the
highest id added, ``last_removal``: the last removal applied), so it can be brought up
to date by reading what came after. Removed ids become tombstones that a FAISS
``IDSelector`` leaves out of every search (no over-fetching); ``tombstones`` tells the
gallery when a rebuild (compaction) is due.

A snapshot is two files: ``NAME-<random>.faiss`` (``faiss.write_index``) and
``NAME.json``, which names that file and holds the header (identity, dimension, kind,
watermarks, tombstones). The JSON is replaced atomically after the index file is fully
written, so a crash leaves the previous snapshot in force; a missing or unreadable
snapshot only means a rebuild from the records.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.files import write_text

KINDS = ("flat", "hnsw")
HNSW_M = 32
LOCK_FILE = "snapshot.lock"


def _new_index(dim: int, kind: str) -> faiss.IndexIDMap:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    inner: faiss.Index
    if kind == "flat":
        inner = faiss.IndexFlatIP(dim)
    else:
        inner = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    return faiss.IndexIDMap(inner)


def as_matrix(x: np.ndarray, dim: int, what: str = "vectors") -> np.ndarray:
    """``x`` as a C-contiguous float32 ``n×dim`` matrix of finite numbers (ValueError)."""
    arr = np.asarray(x)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise ValueError(f"{what} must have shape (n, {dim}), got {np.shape(x)}")
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{what} must be real numbers, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} contain NaN or infinite values")
    return arr


class VectorIndex:
    """Inner-product nearest neighbours over int64 ids, with tombstones. Thread-safe."""

    def __init__(self, dim: int, kind: str = "flat") -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        self.dim, self.kind = dim, kind
        self._index = _new_index(dim, kind)
        self._tombstones: set[int] = set()
        self._selector: Any = None
        self.last_id = 0
        self.last_removal = 0
        self._lock = threading.RLock()

    def __len__(self) -> int:
        """Live (not removed) vectors."""
        return int(self._index.ntotal) - len(self._tombstones)

    def __repr__(self) -> str:
        return f"VectorIndex(dim={self.dim}, kind={self.kind!r}, live={len(self)})"

    @property
    def tombstones(self) -> int:
        return len(self._tombstones)

    @property
    def total(self) -> int:
        """Vectors in FAISS, removed ones included."""
        return int(self._index.ntotal)

    def add(self, ids: Iterable[int], vectors: np.ndarray) -> None:
        """Add vectors under ids larger than every id added so far."""
        id_arr = np.fromiter((int(i) for i in ids), dtype=np.int64)
        arr = as_matrix(vectors, self.dim)
        if arr.shape[0] != id_arr.shape[0]:
            raise ValueError(f"got {arr.shape[0]} vectors for {id_arr.shape[0]} ids")
        if not id_arr.size:
            return
        with self._lock:
            if id_arr.min() <= self.last_id or np.any(np.diff(id_arr) <= 0):
                raise ValueError("ids must increase and be larger than every id added")
            self._index.add_with_ids(arr, id_arr)
            self.last_id = int(id_arr[-1])

    def remove(self, ids: Iterable[int]) -> None:
        """Leave ids out of searches from now on (ids this index never held: ignored)."""
        with self._lock:
            new = {int(i) for i in ids if 0 < int(i) <= self.last_id} - self._tombstones
            if new:
                self._tombstones |= new
                self._selector = None

    def _params(self) -> Any:
        if not self._tombstones:
            return None
        if self._selector is None:
            batch = faiss.IDSelectorBatch(np.fromiter(self._tombstones, dtype=np.int64))
            self._selector = (faiss.IDSelectorNot(batch), batch)  # keep batch alive
        params: Any = getattr(
            faiss, "SearchParametersHNSW" if self.kind == "hnsw" else "SearchParameters"
        )
        return params(sel=self._selector[0])  # the stubs do not know these keywords

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[int, float]]]:
        """The ``k`` nearest live ids of each query row, best first, as (id, score)."""
        arr = as_matrix(queries, self.dim, "queries")
        if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        with self._lock:
            k_live = min(int(k), len(self))
            if k_live == 0:
                return [[] for _ in range(arr.shape[0])]
            params = self._params()
            scores, labels = self._index.search(arr, k_live, params=params)
        return [
            [(int(i), float(s)) for s, i in zip(row_s, row_i, strict=True) if i >= 0]
            for row_s, row_i in zip(scores, labels, strict=True)
        ]

    # --- snapshots --------------------------------------------------------------------------

    def save(self, stem: Path, header: dict[str, Any]) -> None:
        """Write a snapshot as ``stem.json`` + ``stem-<random>.faiss`` (see the module)."""
        stem = Path(stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:  # a consistent copy, written outside the lock
            index = faiss.clone_index(self._index)
            doc = {
                **header,
                "dim": self.dim,
                "kind": self.kind,
                "last_id": self.last_id,
                "last_removal": self.last_removal,
                "tombstones": sorted(self._tombstones),
            }
        name = f"{stem.name}-{uuid.uuid4().hex[:12]}.faiss"
        tmp = stem.with_name(f".{name}.tmp")
        with _snapshot_lock(stem.parent):  # one snapshot writer at a time, across processes
            try:
                faiss.write_index(index, str(tmp))
                fd = os.open(tmp, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.replace(tmp, stem.with_name(name))
            finally:
                if tmp.exists():
                    tmp.unlink()
            write_text(stem.with_suffix(".json"), json.dumps({**doc, "file": name}))
            _clear_unreferenced(stem)

    @classmethod
    def load(cls, stem: Path, header: dict[str, Any]) -> VectorIndex | None:
        """The snapshot at ``stem`` if its header matches ``header``; None if there is
        none or it is unreadable or made for something else (rebuild then)."""
        stem = Path(stem)
        try:
            doc = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
            if any(doc.get(key) != value for key, value in header.items()):
                return None
            index = faiss.read_index(str(stem.with_name(doc["file"])))
            self = cls(int(doc["dim"]), str(doc["kind"]))
            if not isinstance(index, faiss.IndexIDMap) or index.d != self.dim:
                return None
            self._index = index
            self._tombstones = {int(i) for i in doc["tombstones"]}
            self.last_id, self.last_removal = int(doc["last_id"]), int(doc["last_removal"])
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            return None
        return self


@contextlib.contextmanager
def _snapshot_lock(folder: Path) -> Iterator[None]:
    with open(folder / LOCK_FILE, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _referenced(stem: Path) -> str | None:
    try:
        doc = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
        return str(doc["file"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _clear_unreferenced(stem: Path) -> None:
    """Delete this stem's snapshot files the JSON does not name (replaced ones, and
    temp files a crash left). Called with the snapshot lock held."""
    keep = _referenced(stem)
    for path in stem.parent.glob(f"*{stem.name}-*.faiss*"):
        if path.name != keep:
            path.unlink(missing_ok=True)
    for path in stem.parent.glob(f".{stem.name}.json.*.tmp"):
        path.unlink(missing_ok=True)


def clear_leftovers(folder: Path, stems: Iterable[str]) -> None:
    """Remove what interrupted snapshot writes left in ``folder`` (safe at any time)."""
    if not folder.is_dir():
        return
    with _snapshot_lock(folder):
        for name in stems:
            _clear_unreferenced(folder / name)
