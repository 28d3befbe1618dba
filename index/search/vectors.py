"""The gallery's search structure: FAISS inner-product indexes derived from the records.

    index = VectorIndex(dim, "flat")             # or "hnsw", "ivfpq", "ivfopq" (index_kinds)
    index.add(ids, vectors); index.remove(ids)          # removal: a tombstone
    scores, ids = index.search(queries, k)
    index.save(folder / "images", header); VectorIndex.load(folder / "images", header)

The records (``groundsearch.index.store.records``) are the truth; this index only answers
"which ids are nearest". It remembers how far it has read the records (``last_id``: the
highest id added, ``last_removal``: the last removal applied), so it can be brought up
to date by reading what came after. Removed ids become tombstones that a FAISS
``IDSelector`` leaves out of every search (no over-fetching); ``tombstones`` tells the
gallery when a rebuild (compaction) is due.

Two segments: the *main* index of the kind asked for, and an exact *delta*. ``flat`` and
``hnsw`` take every addition into main. A compressed main (``ivfpq``, ``ivfopq``) is
trained and filled once (``build``: shard by shard in bounded memory, resumable,
``groundsearch.index.search.compressed``), then sealed: it is written once and read back
memory-mapped, and later
additions go to the delta, searched beside it; ``delta_due`` tells the gallery when
the delta is large enough to fold into a rebuilt main. Until an ``ivfpq`` index is
built, everything is in the (exact) delta.

A snapshot is ``NAME.json`` naming ``NAME-<random>.faiss`` (main) or, for a sealed
main, ``NAME-<random>.main.faiss`` (written once, when sealed, with its store, ids and
codec beside it: ``.main.faiss.codes``, ``.ids``, ``.codec``) and
``NAME-<random>.delta.faiss``; the JSON also holds the header (identity, dimension,
kind, watermarks, tombstones). It is replaced atomically after the files it names are
written, so a crash leaves the previous snapshot in force; a missing or unreadable
snapshot only means a rebuild from the records.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.common.files import write_text
from groundsearch.index.search import compressed, index_kinds
from groundsearch.index.search.compressed import CompressedIndex
from groundsearch.index.search.index_kinds import COMPRESSED, INDEX_KINDS, IndexSettings
from groundsearch.index.search.sketches import CANDIDATES_PER_HIT, MIN_CANDIDATES, SketchKeeper

__all__ = ["INDEX_KINDS", "IndexSettings", "VectorIndex", "as_matrix", "clear_leftovers"]

log = logging.getLogger("groundsearch.index")
LOCK_FILE = "snapshot.lock"
#: Fold the delta into a rebuilt main once it holds this share of main's vectors…
DELTA_SHARE = 0.05
#: … and at least this many.
DELTA_MIN = 50_000
#: A main of float32 vectors (``flat``, ``hnsw``) this large gets a sketch for
#: ``score_likeliest`` (``groundsearch.index.search.sketches``), trained on this many of them.
SKETCH_FROM = 50_000
SKETCH_SAMPLE = 20_000
#: A sealed main (``NAME-<random>.main.faiss``) younger than this is kept even when no
#: JSON names it yet: it is written before the snapshot that names it.
KEEP_YOUNG_S = 600


def as_additions(
    ids: Iterable[int], vectors: np.ndarray, dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """Ids and vectors to add, as int64 and float32 arrays of one length (ValueError)."""
    id_arr = np.fromiter((int(i) for i in ids), dtype=np.int64)
    arr = as_matrix(vectors, dim)
    if arr.shape[0] != id_arr.shape[0]:
        raise ValueError(f"got {arr.shape[0]} vectors for {id_arr.shape[0]} ids")
    return id_arr, arr


def check_after(ids: np.ndarray, last_id: int) -> None:
    """ValueError unless ``ids`` increase and are all larger than ``last_id``."""
    if ids.min() <= last_id or np.any(np.diff(ids) <= 0):
        raise ValueError("ids must increase and be larger than every id added")


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

    def __init__(self, dim: int, kind: str = "flat", settings: IndexSettings | None = None) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if kind not in INDEX_KINDS:
            raise ValueError(f"kind must be one of {INDEX_KINDS}, got {kind!r}")
        self.dim, self.kind = dim, kind
        self.settings = settings or IndexSettings()
        self._main: Any = index_kinds.new_index(dim, "flat" if kind in COMPRESSED else kind)
        self._delta = index_kinds.new_index(dim, "flat")
        self.sealed = False  # main takes no more additions (a built ivfpq index)
        self._main_file: str | None = None  # where a sealed main is written
        self._tombstones: set[int] = set()
        self._selector: Any = None
        self.last_id = 0
        self.last_removal = 0
        self._lock = threading.RLock()
        self._sketches = SketchKeeper(SKETCH_FROM, SKETCH_SAMPLE)

    def __len__(self) -> int:
        """Live (not removed) vectors."""
        return self.total - len(self._tombstones)

    def __repr__(self) -> str:
        return f"VectorIndex(dim={self.dim}, kind={self.kind!r}, live={len(self)})"

    @property
    def tombstones(self) -> int:
        return len(self._tombstones)

    @property
    def total(self) -> int:
        """Vectors in FAISS, removed ones included."""
        return int(self._main.ntotal) + int(self._delta.ntotal)

    @property
    def delta(self) -> int:
        """Vectors added after main was sealed (searched exactly)."""
        return int(self._delta.ntotal)

    @property
    def built(self) -> bool:
        """Whether main is of this index's kind (a compressed index is, once built)."""
        return self.kind not in COMPRESSED or self.sealed

    def delta_due(self) -> bool:
        """Whether the delta has grown enough to fold into a rebuilt main."""
        if self.kind not in COMPRESSED:
            return False
        return self.delta >= max(DELTA_MIN, DELTA_SHARE * int(self._main.ntotal))

    def describe(self) -> str:
        """What main is, e.g. ``IVF1024,PQ64,Refine(SQfp16)``, and the delta's size."""
        if isinstance(self._main, CompressedIndex):
            return f"{self._main.name} + {self.delta} exact"
        return f"{index_kinds.index_name(self._main)} + {self.delta} exact"

    # --- building an ivfpq index ----------------------------------------------------------------

    @classmethod
    def build(
        cls,
        dim: int,
        kind: str,
        n: int,
        sample: np.ndarray,
        chunks: Iterable[tuple[list[int], np.ndarray]],
        stem: Path | None = None,
        settings: IndexSettings | None = None,
        key: str = "",
    ) -> VectorIndex:
        """An index of ``kind`` over ``chunks`` (about ``n`` vectors in all, ids
        increasing). A compressed index is trained on ``sample`` and built shard by
        shard (``compressed.build_compressed``): when ``stem`` is given, in the work
        folder ``.NAME.build`` beside it (a build interrupted there with the same
        shape and ``key`` resumes), then moved next to it and mapped back; without a
        ``stem``, in a temporary folder and read into memory. ``sample`` is unused by
        the other kinds. Too few vectors to train on: everything goes to the exact
        delta. A disk too small for the build raises ``compressed.DiskSpaceError``."""
        self = cls(dim, kind, settings)
        if kind not in COMPRESSED:
            for ids, vectors in chunks:
                self.add(ids, vectors)
            return self
        sample = as_matrix(sample, dim, "training sample")
        self.sealed = True
        if sample.shape[0] < self.settings.min_train(n):  # untrainable yet: the delta takes all
            for ids, vectors in chunks:
                self.add(ids, vectors)
            return self
        if stem is None:
            with tempfile.TemporaryDirectory(prefix="groundsearch-build-") as tmp:
                built = compressed.build_compressed(
                    dim, kind, n, sample, chunks, Path(tmp), self.settings, key
                )
                self._main = CompressedIndex.open(built, mmap=False)
        else:
            stem = Path(stem)
            stem.parent.mkdir(parents=True, exist_ok=True)
            work = stem.with_name(f".{stem.name}.build")
            built = compressed.build_compressed(
                dim, kind, n, sample, chunks, work, self.settings, key
            )
            self._place(stem, work)
        if self._main.ntotal:
            self.last_id = int(self._main.ids[-1])
        return self

    def _place(self, stem: Path, work: Path) -> None:
        """Move the main built in ``work`` beside ``stem`` and map it from there."""
        name = f"{stem.name}-{uuid.uuid4().hex[:12]}.main.faiss"
        with _snapshot_lock(stem.parent):
            compressed.move_to(work, stem.with_name(name))
        self._main = CompressedIndex.open(stem.with_name(name))
        self._main_file = name

    def seal(self, stem: Path | None) -> None:
        """Take no more additions into main; write a compressed main held in memory
        beside ``stem`` and map it back."""
        with self._lock:
            self.sealed = True
            if stem is None or not isinstance(self._main, CompressedIndex):
                return
            stem = Path(stem)
            stem.parent.mkdir(parents=True, exist_ok=True)
            work = stem.with_name(f".{stem.name}.write-{uuid.uuid4().hex[:8]}")
            try:
                work.mkdir()
                self._main.write(work / "main.faiss")
                self._place(stem, work)
            except OSError as exc:  # a read-only folder: main stays in memory
                log.warning("could not write %s: %s", stem, exc)
                shutil.rmtree(work, ignore_errors=True)

    # --- changing -------------------------------------------------------------------------------

    def add(self, ids: Iterable[int], vectors: np.ndarray) -> None:
        """Add vectors under ids larger than every id added so far."""
        id_arr, arr = as_additions(ids, vectors, self.dim)
        if not id_arr.size:
            return
        with self._lock:
            check_after(id_arr, self.last_id)
            (self._delta if self.sealed else self._main).add_with_ids(arr, id_arr)
            self.last_id = int(id_arr[-1])

    def remove(self, ids: Iterable[int]) -> None:
        """Leave ids out of searches from now on (ids this index never held: ignored)."""
        with self._lock:
            new = {int(i) for i in ids if 0 < int(i) <= self.last_id} - self._tombstones
            if new:
                self._tombstones |= new
                self._selector = None

    def _sel(self) -> Any:
        if not self._tombstones:
            return None
        if self._selector is None:
            removed = np.sort(np.fromiter(self._tombstones, dtype=np.int64))
            batch = faiss.IDSelectorBatch(removed)
            self._selector = (faiss.IDSelectorNot(batch), batch, removed)  # keep batch alive
        return self._selector[0]

    def _removed(self) -> np.ndarray:
        """The tombstones, sorted."""
        return self._selector[2] if self._sel() is not None else np.empty(0, np.int64)

    def search(
        self, queries: np.ndarray, k: int, settings: IndexSettings | None = None
    ) -> list[list[tuple[int, float]]]:
        """The ``k`` nearest live ids of each query row, best first, as (id, score);
        ``settings``: other search settings for this search (default: the index's)."""
        arr = as_matrix(queries, self.dim, "queries")
        if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        settings = settings or self.settings
        with self._lock:
            k_live = min(int(k), len(self))
            if k_live == 0:
                return [[] for _ in range(arr.shape[0])]
            sel = self._sel()
            with _one_thread_for(arr.shape[0]):
                parts = [
                    _search_part(part, arr, k_live, settings, sel)
                    for part in (self._main, self._delta)
                    if part.ntotal
                ]
        scores, labels = parts[0] if len(parts) == 1 else _merge(parts, k_live)
        return [
            [(int(i), float(s)) for s, i in zip(row_s, row_i, strict=True) if i >= 0]
            for row_s, row_i in zip(scores, labels, strict=True)
        ]

    # --- searching among given ids (filters) -----------------------------------------------

    def held(self, ids: np.ndarray) -> np.ndarray:
        """The live ids among ``ids`` (sorted, unique int64) that this index holds."""
        ids = np.asarray(ids, np.int64)
        with self._lock:
            keep = np.zeros(ids.shape, bool)
            for part in (self._main, self._delta):
                keep |= _positions(part, ids) >= 0
            return ids[keep & ~np.isin(ids, self._removed(), assume_unique=True)]

    def stored(self, ids: Sequence[int]) -> np.ndarray | None:
        """The float32 vectors of ``ids``, in order, read from memory: the copies a flat
        or HNSW segment searches. None when one is not held so (removed, never added, or
        in a compressed segment): the records then have it."""
        want = np.asarray(ids, np.int64)
        out = np.zeros((want.size, self.dim), np.float32)
        found = np.zeros(want.size, bool)
        with self._lock:
            if np.isin(want, self._removed()).any():
                return None
            parts: tuple[Any, ...] = (self._main, self._delta)
            for part in parts:
                if not part.ntotal or isinstance(part, CompressedIndex):
                    continue
                inner = index_kinds.FAISS.downcast_index(part.index)
                if not isinstance(inner, index_kinds.FAISS.IndexFlat | index_kinds.FAISS.IndexHNSW):
                    continue
                pos = _positions(part, want)
                new = (pos >= 0) & ~found
                if new.any():
                    out[new] = _stored(part)[pos[new]]
                    found |= new
        return out if found.all() else None

    def score(self, query: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Exact inner products of ``query`` (one vector) with the live vectors among
        ``ids`` (sorted, unique int64) that this index holds: (ids, scores), ids left out
        when removed or not (yet) held. Read from the index's own copies: the float32
        vectors of ``flat``, ``hnsw`` and the delta, the float16 re-rank copy of a
        built ``ivfpq`` main (so a score is the one its search reports)."""
        q = as_matrix(query, self.dim, "query")[0]
        ids = np.asarray(ids, np.int64)
        out_ids, out_scores = [], []
        with self._lock:
            ids = ids[~np.isin(ids, self._removed(), assume_unique=True)]
            for part in (self._main, self._delta):
                pos = _positions(part, ids)
                found = pos >= 0
                if found.any():
                    out_ids.append(ids[found])
                    out_scores.append(_inner_products(part, q, pos[found]))
        if not out_ids:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        return np.concatenate(out_ids), np.concatenate(out_scores)

    def score_likeliest(
        self, query: np.ndarray, ids: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``score`` for the search of the ``k`` best among ``ids``: where many of them sit
        in a large float32 main, only the likeliest (``CANDIDATES_PER_HIT`` per hit, by its
        sketch: ``groundsearch.index.search.sketches``) are scored; otherwise every one."""
        count = max(MIN_CANDIDATES, CANDIDATES_PER_HIT * int(k))
        ids = np.asarray(ids, np.int64)
        with self._lock:
            sketch = None
            large = self.kind not in COMPRESSED and self._main.ntotal >= SKETCH_FROM
            if ids.size > count and large:
                sketch = self._sketches.of(self._main, _stored(self._main))
            if sketch is None:
                return self.score(query, ids)
            q = as_matrix(query, self.dim, "query")[0]
            ids = ids[~np.isin(ids, self._removed(), assume_unique=True)]
            pos = _positions(self._main, ids)
            held = pos >= 0
            picked = sketch.best(q, pos[held], count)
            main_ids = ids[held][picked]
            main_scores = _inner_products(self._main, q, pos[held][picked])
            if held.all():
                return main_ids, main_scores
            rest_ids, rest_scores = self.score(query, ids[~held])
        return np.concatenate([main_ids, rest_ids]), np.concatenate([main_scores, rest_scores])

    def search_among(
        self, query: np.ndarray, k: int, ids: np.ndarray, settings: IndexSettings | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest live ids among ``ids`` (sorted, unique int64) of one query,
        best first: the index's own search restricted by a FAISS ``IDSelector`` (the ids,
        and not the tombstones), with ``settings`` (default: the index's; a filter's
        search is wider, ``IndexSettings.widened``). Approximate kinds may return fewer
        than ``k`` (or miss some of the best): the caller checks (``score``)."""
        arr = as_matrix(query, self.dim, "query")
        ids = np.ascontiguousarray(ids, np.int64)
        if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        if not ids.size:
            return []
        allowed = faiss.IDSelectorBatch(ids)
        settings = settings or self.settings
        with self._lock:
            tomb = self._sel()
            sel = allowed if tomb is None else faiss.IDSelectorAnd(allowed, tomb)
            k_live = min(int(k), int(ids.size))
            parts = [
                _search_part(part, arr, k_live, settings, sel)
                for part in (self._main, self._delta)
                if part.ntotal
            ]
        if not parts:
            return []
        scores, labels = parts[0] if len(parts) == 1 else _merge(parts, k_live)
        return [(int(i), float(s)) for s, i in zip(scores[0], labels[0], strict=True) if i >= 0]

    # --- snapshots --------------------------------------------------------------------------

    def save(self, stem: Path, header: dict[str, Any]) -> None:
        """Write a snapshot as ``stem.json`` + ``stem-<random>.faiss`` (see the module)."""
        stem = Path(stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        if self.sealed and self._main_file is None and self._main.ntotal:
            self.seal(stem)  # built without a place to go: written now, once
        with self._lock:  # a consistent copy, written outside the lock
            main = None if self.sealed else faiss.clone_index(self._main)
            delta = faiss.clone_index(self._delta) if self.sealed else None
            doc = {
                **header,
                "dim": self.dim,
                "kind": self.kind,
                "sealed": self.sealed,
                "settings": vars(self.settings),
                "last_id": self.last_id,
                "last_removal": self.last_removal,
                "tombstones": sorted(self._tombstones),
            }
            main_file = self._main_file
        token = uuid.uuid4().hex[:12]
        with _snapshot_lock(stem.parent):  # one snapshot writer at a time, across processes
            if main is not None:
                main_file = f"{stem.name}-{token}.faiss"
                _write_synced(main, stem.with_name(main_file))
            if delta is not None:
                doc["delta"] = f"{stem.name}-{token}.delta.faiss"
                _write_synced(delta, stem.with_name(doc["delta"]))
            write_text(stem.with_suffix(".json"), json.dumps({**doc, "file": main_file}))
            _clear_unreferenced(stem)

    @classmethod
    def load(cls, stem: Path, header: dict[str, Any]) -> VectorIndex | None:
        """The snapshot at ``stem`` if its header matches ``header``; None if there is
        none or it is unreadable or made for something else (rebuild then). A sealed
        main is memory-mapped."""
        stem = Path(stem)
        try:
            doc = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
            if any(doc.get(key) != value for key, value in header.items()):
                return None
            self = cls(int(doc["dim"]), str(doc["kind"]), IndexSettings(**doc.get("settings", {})))
            self.sealed = bool(doc.get("sealed", False))
            if doc.get("file"):
                path = stem.with_name(doc["file"])
                main: Any
                if self.sealed and path.with_name(path.name + ".ids").exists():
                    main = CompressedIndex.open(path)
                else:  # flat, hnsw, or a compressed main written before the sharded build
                    main = index_kinds.read(path, mmap=self.sealed)
                    if not isinstance(main, faiss.IndexIDMap):
                        return None
                if main.d != self.dim:
                    return None
                self._main, self._main_file = main, doc["file"]
            if doc.get("delta"):
                self._delta = faiss.read_index(str(stem.with_name(doc["delta"])))
            self._tombstones = {int(i) for i in doc["tombstones"]}
            self.last_id, self.last_removal = int(doc["last_id"]), int(doc["last_removal"])
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            return None
        return self


@contextlib.contextmanager
def _one_thread_for(queries: int) -> Iterator[None]:
    """One OpenMP thread (in this thread only) for a single query: a team adds its
    synchronisation and nothing else (0.1 ms against several on a busy machine)."""
    if queries != 1:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


def _search_part(
    part: Any, arr: np.ndarray, k: int, settings: IndexSettings, sel: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, ids) of one segment's search."""
    if isinstance(part, CompressedIndex):
        return part.search(arr, k, settings, sel)
    return part.search(arr, k, params=index_kinds.search_params(part, settings, sel))


def _merge(parts: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """The best ``k`` of several (scores, labels) results per query row."""
    scores = np.concatenate([s for s, _ in parts], axis=1)
    labels = np.concatenate([lab for _, lab in parts], axis=1)
    scores = np.where(labels >= 0, scores, -np.inf)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, 1), np.take_along_axis(labels, order, 1)


def _positions(part: Any, ids: np.ndarray) -> np.ndarray:
    """Where each of ``ids`` sits in ``part`` (an ``IndexIDMap`` whose ids increase), -1
    where it does not. Its id map is read in place (call with the index's lock held)."""
    if isinstance(part, CompressedIndex):
        return part.positions(ids)
    n = int(part.ntotal)
    if n == 0 or not ids.size:
        return np.full(ids.shape, -1, np.int64)
    held = faiss.rev_swig_ptr(part.id_map.data(), n)
    if int(held[-1]) - int(held[0]) == n - 1:  # ids without gaps: no search needed
        pos = ids - held[0]
        return np.where((pos >= 0) & (pos < n), pos, -1).astype(np.int64)
    pos = np.minimum(np.searchsorted(held, ids), n - 1)
    return np.where(held[pos] == ids, pos, -1).astype(np.int64)


def _stored(part: Any) -> np.ndarray:
    """The float32 vectors of ``part`` (a flat or HNSW ``IndexIDMap``), in place."""
    inner = index_kinds.FAISS.downcast_index(part.index)
    if isinstance(inner, index_kinds.FAISS.IndexHNSW):
        inner = index_kinds.FAISS.downcast_index(inner.storage)
    n, d = int(inner.ntotal), int(inner.d)
    return faiss.rev_swig_ptr(inner.get_xb(), n * d).reshape(n, d)


def _inner_products(part: Any, query: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The inner products of ``query`` with the vectors at positions ``pos`` of ``part``."""
    if isinstance(part, CompressedIndex):  # a built compressed main: its store
        return part.inner_products(query, pos)
    inner = index_kinds.FAISS.downcast_index(part.index)
    if isinstance(inner, index_kinds.FAISS.IndexRefine):  # a built ivfpq: its re-rank copy
        stored = index_kinds.FAISS.downcast_index(inner.refine_index)
        return np.asarray(stored.reconstruct_batch(pos) @ query, np.float32)
    if isinstance(inner, index_kinds.FAISS.IndexHNSW):
        inner = index_kinds.FAISS.downcast_index(inner.storage)
    out = np.empty(pos.size, np.float32)
    labels = np.ascontiguousarray(pos, np.int64)
    q = np.ascontiguousarray(query, np.float32)
    inner.compute_distance_subset(
        1, faiss.swig_ptr(q), pos.size, faiss.swig_ptr(out), faiss.swig_ptr(labels)
    )
    return out


def _write_synced(index: faiss.Index, path: Path) -> None:
    """Write ``index`` to ``path`` through a temporary file, synced before the rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        faiss.write_index(index, str(tmp))
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def _snapshot_lock(folder: Path) -> Iterator[None]:
    with open(folder / LOCK_FILE, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _referenced(stem: Path) -> set[str]:
    try:
        doc = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
        named = {str(doc[key]) for key in ("file", "delta") if doc.get(key)}
        return named | {f"{name}{suffix}" for name in named for suffix in compressed.SUFFIXES}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def _clear_unreferenced(stem: Path) -> None:
    """Delete this stem's snapshot files the JSON does not name (replaced ones, and
    temp files a crash left), unless young (a rebuilt main waits for its snapshot).
    Called with the snapshot lock held."""
    keep = _referenced(stem)
    now = time.time()
    for path in stem.parent.glob(f"*{stem.name}-*.faiss*"):
        with contextlib.suppress(FileNotFoundError):
            young = ".main.faiss" in path.name and now - path.stat().st_mtime < KEEP_YOUNG_S
            if path.name not in keep and not young:
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
