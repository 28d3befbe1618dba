"""The gallery's search structure: FAISS inner-product indexes derived from the records,
with watermarks (``last_id``, ``last_removal``), tombstones, a *main* and an exact
*delta* (additions after a compressed main is sealed, until ``delta_due``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.index.search import index_kinds, segments, snapshots
from groundsearch.index.search.compressed import CompressedIndex
from groundsearch.index.search.index_kinds import COMPRESSED, INDEX_KINDS, IndexSettings
from groundsearch.index.search.sketches import SketchKeeper
from groundsearch.index.search.snapshots import Snapshot
from groundsearch.index.store.records import as_matrix

__all__ = ["INDEX_KINDS", "IndexSettings", "VectorIndex"]

#: Fold the delta into a rebuilt main once it holds this share of main's vectors…
DELTA_SHARE = 0.05
#: … and at least this many.
DELTA_MIN = 50_000
#: A main of float32 vectors (``flat``, ``hnsw``) this large gets a sketch for
#: ``score_likeliest`` (``groundsearch.index.search.sketches``), trained on this many of them.
SKETCH_FROM = 50_000
SKETCH_SAMPLE = 20_000


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
        self._tombstones = segments.Tombstones()
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
        """An index of ``kind`` over ``chunks`` (ids increasing); a compressed one trained
        on ``sample`` (too few: all in the delta); ``DiskSpaceError`` for a short disk."""
        self = cls(dim, kind, settings)
        if kind in COMPRESSED:
            sample = as_matrix(sample, dim, "training sample")
            self.sealed = True
        if kind not in COMPRESSED or sample.shape[0] < self.settings.min_train(n):
            for ids, vectors in chunks:  # (a compressed index untrainable yet: its delta)
                self.add(ids, vectors)
            return self
        stem = None if stem is None else Path(stem)
        built = snapshots.build_main(stem, dim, kind, n, sample, chunks, self.settings, key)
        self._main, self._main_file = built
        if self._main.ntotal:
            self.last_id = int(self._main.ids[-1])
        return self

    def seal(self, stem: Path | None) -> None:
        """Take no more additions into main; write an in-memory compressed main."""
        with self._lock:
            self.sealed = True
            if stem is not None and isinstance(self._main, CompressedIndex):
                written = snapshots.write_main(Path(stem), self._main)
                if written is not None:  # None: a read-only folder, main stays in memory
                    self._main, self._main_file = written

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
            self._tombstones.add(i for i in ids if 0 < int(i) <= self.last_id)

    def search(
        self, queries: np.ndarray, k: int, settings: IndexSettings | None = None
    ) -> list[list[tuple[int, float]]]:
        """The ``k`` nearest live ids of each query row, best first, as (id, score)."""
        return segments.hits(*self.search_arrays(queries, k, settings))

    def search_arrays(
        self, queries: np.ndarray, k: int, settings: IndexSettings | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``search``'s answer as (scores, ids) rows, ids of -1 where fewer were found."""
        arr = as_matrix(queries, self.dim, "queries")
        check_k(k)
        settings = settings or self.settings
        with self._lock:
            k_live = min(int(k), len(self))
            if k_live == 0:
                n = arr.shape[0]
                return np.empty((n, 0), np.float32), np.empty((n, 0), np.int64)
            live = self._tombstones.live()
            with _one_thread_for(arr.shape[0]):
                return segments.search((self._main, self._delta), arr, k_live, settings, live)

    def held(self, ids: np.ndarray) -> np.ndarray:
        """The live ids among ``ids`` (sorted, unique int64) that this index holds."""
        ids = np.asarray(ids, np.int64)
        with self._lock:
            return segments.held((self._main, self._delta), self._tombstones.sorted(), ids)

    def stored(self, ids: Sequence[int] | np.ndarray) -> np.ndarray | None:
        """``segments.stored``: None when a vector is not held in memory."""
        want = np.asarray(ids, np.int64)
        with self._lock:
            parts, removed = (self._main, self._delta), self._tombstones.sorted()
            return segments.stored(parts, removed, want, self.dim)

    def products(self, ids: Sequence[int] | np.ndarray, weights: np.ndarray) -> np.ndarray | None:
        """``segments.products``: None when a vector is not held in memory."""
        want = np.asarray(ids, np.int64)
        with self._lock:
            parts, removed = (self._main, self._delta), self._tombstones.sorted()
            return segments.products(parts, removed, want, weights)

    def score(self, query: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores) of ``query`` with the live ones among ``ids`` (``segments.score``)."""
        q, ids = as_matrix(query, self.dim, "query")[0], np.asarray(ids, np.int64)
        with self._lock:
            return segments.score((self._main, self._delta), self._tombstones.sorted(), q, ids)

    def score_likeliest(
        self, query: np.ndarray, ids: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``segments.score_likeliest`` (a compressed main has no sketch)."""
        q, ids = as_matrix(query, self.dim, "query")[0], np.asarray(ids, np.int64)
        sketches = None if self.kind in COMPRESSED else self._sketches
        with self._lock:
            parts, removed = (self._main, self._delta), self._tombstones.sorted()
            return segments.score_likeliest(parts, removed, q, ids, int(k), sketches)

    def search_among(
        self, query: np.ndarray, k: int, ids: np.ndarray, settings: IndexSettings | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` nearest live ids among ``ids`` (sorted, unique) of one query, best
        first, through an ``IDSelector`` (approximate kinds may miss some)."""
        arr = as_matrix(query, self.dim, "query")
        ids = np.ascontiguousarray(ids, np.int64)
        check_k(k)
        if not ids.size:
            return []
        allowed = faiss.IDSelectorBatch(ids)
        settings = settings or self.settings
        with self._lock:
            live = self._tombstones.live()
            sel = allowed if live is None else faiss.IDSelectorAnd(allowed, live)
            k_live = min(int(k), int(ids.size))
            found = segments.search((self._main, self._delta), arr, k_live, settings, sel)
        return segments.hits(*found)[0]

    def save(self, stem: Path, header: dict[str, Any]) -> None:
        """Write a snapshot as ``stem.json`` + ``stem-<random>.faiss`` (``snapshots``)."""
        stem = Path(stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        if self.sealed and self._main_file is None and self._main.ntotal:
            self.seal(stem)  # built without a place to go: written now, once
        with self._lock:  # a consistent copy, written outside the lock
            snapshot = Snapshot(
                self.dim,
                self.kind,
                self.sealed,
                self.settings,
                self.last_id,
                self.last_removal,
                sorted(self._tombstones),
                main=None if self.sealed else faiss.clone_index(self._main),
                main_file=self._main_file,
                delta=faiss.clone_index(self._delta) if self.sealed else None,
            )
        snapshots.write(stem, header, snapshot)

    @classmethod
    def load(cls, stem: Path, header: dict[str, Any]) -> VectorIndex | None:
        """The snapshot at ``stem`` if its header matches, else None; a sealed main mapped."""
        snapshot = snapshots.read(Path(stem), header)
        if snapshot is None:
            return None
        try:
            self = cls(snapshot.dim, snapshot.kind, snapshot.settings)
        except ValueError:
            return None
        self.sealed, self._tombstones = snapshot.sealed, segments.Tombstones(snapshot.tombstones)
        if snapshot.main is not None:
            self._main, self._main_file = snapshot.main, snapshot.main_file
        if snapshot.delta is not None:
            self._delta = snapshot.delta
        self.last_id, self.last_removal = snapshot.last_id, snapshot.last_removal
        return self


def check_k(k: Any) -> None:
    if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")


@contextlib.contextmanager
def _one_thread_for(queries: int) -> Iterator[None]:
    """One OpenMP thread (in this thread only) for a single query: a team only adds its
    synchronisation (0.1 ms against several on a busy machine)."""
    if queries != 1:
        yield
        return
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)
