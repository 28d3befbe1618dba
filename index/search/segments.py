"""Reading a ``VectorIndex``'s segments in place: ``parts`` are main then delta,
``removed`` the sorted tombstones; the caller holds the index's lock."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import faiss
import numpy as np

from groundsearch.index.search import index_kinds
from groundsearch.index.search.compressed import CompressedIndex
from groundsearch.index.search.index_kinds import IndexSettings
from groundsearch.index.search.sketches import CANDIDATES_PER_HIT, MIN_CANDIDATES, SketchKeeper

#: ``products`` multiplies a whole segment, then takes the ids' rows, when the ids are at
#: least 1 / WHOLE_SHARE of it (a matrix-vector product a row reads it in order, about
#: twice as fast a vector as products at scattered positions).
WHOLE_SHARE = 2


class Tombstones:
    """An index's removed ids: a set, and (made again after a change) sorted and as a
    FAISS ``IDSelector`` of the others."""

    def __init__(self, ids: Iterable[int] = ()) -> None:
        self._ids = {int(i) for i in ids}
        self._made: tuple[Any, Any, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[int]:
        return iter(self._ids)

    def add(self, ids: Iterable[int]) -> None:
        new = {int(i) for i in ids} - self._ids
        if new:
            self._ids |= new
            self._made = None

    def live(self) -> Any:
        """A FAISS ``IDSelector`` of every id not removed; None when none is."""
        return self._make()[0] if self._ids else None

    def sorted(self) -> np.ndarray:
        """The removed ids, sorted (int64)."""
        return self._make()[2] if self._ids else np.empty(0, np.int64)

    def _make(self) -> tuple[Any, Any, np.ndarray]:
        if self._made is None:
            removed = np.sort(np.fromiter(self._ids, dtype=np.int64))
            batch = faiss.IDSelectorBatch(removed)
            self._made = (faiss.IDSelectorNot(batch), batch, removed)  # keep batch alive
        return self._made


def search(
    parts: Sequence[Any], arr: np.ndarray, k: int, settings: IndexSettings, sel: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(scores, labels) of the ``k`` best of each query row over the segments (``sel``: the
    ids searched); labels of -1 where fewer were found."""
    found = [_search_part(part, arr, k, settings, sel) for part in parts if part.ntotal]
    if not found:
        n = arr.shape[0]
        return np.empty((n, 0), np.float32), np.empty((n, 0), np.int64)
    return found[0] if len(found) == 1 else _merge(found, k)


def hits(scores: np.ndarray, labels: np.ndarray) -> list[list[tuple[int, float]]]:
    """``search``'s result as (id, score) pairs per query row, the -1 labels left out."""
    return [
        [(i, s) for s, i in zip(row_s.tolist(), row_i.tolist(), strict=True) if i >= 0]
        for row_s, row_i in zip(scores, labels, strict=True)
    ]


def held(parts: Sequence[Any], removed: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The live ids among ``ids`` (sorted, unique int64) that a segment holds."""
    keep = np.zeros(ids.shape, bool)
    for part in parts:
        keep |= _positions(part, ids) >= 0
    return ids[keep & ~np.isin(ids, removed, assume_unique=True)]


def stored(
    parts: Sequence[Any], removed: np.ndarray, ids: np.ndarray, dim: int
) -> np.ndarray | None:
    """The float32 vectors of ``ids``, in order, from a flat or HNSW segment; None when
    one is not held so (removed, never added, or compressed)."""
    if not ids.size:
        return np.zeros((0, dim), np.float32)
    if removed.size and np.isin(ids, removed).any():
        return None
    out: np.ndarray | None = None
    found = np.zeros(ids.size, bool)
    for part in parts:
        if _flat_storage(part) is None:
            continue
        pos = _positions(part, ids)
        here = pos >= 0
        if out is None and here.all():  # all in one segment: one copy
            return stored_rows(part)[pos]
        new = here & ~found
        if new.any():
            if out is None:
                out = np.zeros((ids.size, dim), np.float32)
            out[new] = stored_rows(part)[pos[new]]
            found |= new
    return out if out is not None and found.all() else None


def products(
    parts: Sequence[Any], removed: np.ndarray, ids: np.ndarray, weights: np.ndarray
) -> np.ndarray | None:
    """The inner products (ids × rows) of ``ids``' vectors with each row of ``weights``,
    read in place where ``stored`` would read them (None where it is None)."""
    w = np.ascontiguousarray(weights, np.float32)
    if removed.size and np.isin(ids, removed).any():
        return None
    out: np.ndarray | None = None
    found = np.zeros(ids.size, bool)
    for part in parts:
        storage = _flat_storage(part)
        if storage is None:
            continue
        pos = _positions(part, ids)
        new = (pos >= 0) & ~found
        if out is None and new.all():  # all in one segment
            if WHOLE_SHARE * ids.size >= storage.ntotal:  # most of it: read it in order
                rows = stored_rows(part)
                return np.stack([rows @ row for row in w], axis=1)[pos]
            return _subset_products(storage, w, pos).T
        if new.any():
            out = np.zeros((ids.size, w.shape[0]), np.float32) if out is None else out
            out[new] = _subset_products(storage, w, pos[new]).T
            found |= new
    return out if out is not None and found.all() else None


def score(
    parts: Sequence[Any], removed: np.ndarray, query: np.ndarray, ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(ids, scores): exact inner products of ``query`` with the live vectors among ``ids``,
    from the segments' own copies (a score is the one its search reports)."""
    ids = ids[~np.isin(ids, removed, assume_unique=True)]
    out_ids, out_scores = [], []
    for part in parts:
        pos = _positions(part, ids)
        found = pos >= 0
        if found.any():
            out_ids.append(ids[found])
            out_scores.append(_inner_products(part, query, pos[found]))
    if not out_ids:
        return np.empty(0, np.int64), np.empty(0, np.float32)
    return np.concatenate(out_ids), np.concatenate(out_scores)


def score_likeliest(
    parts: Sequence[Any],
    removed: np.ndarray,
    query: np.ndarray,
    ids: np.ndarray,
    k: int,
    sketches: SketchKeeper | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``score`` for the ``k`` best among ``ids``: when they are many and main has a
    trustworthy sketch, only its ``CANDIDATES_PER_HIT`` likeliest a hit are scored."""
    count = max(MIN_CANDIDATES, CANDIDATES_PER_HIT * int(k))
    main = parts[0]
    sketch = None
    if sketches is not None and ids.size > count and main.ntotal >= sketches.start:
        sketch = sketches.of(main, stored_rows(main))
    if sketch is None:
        return score(parts, removed, query, ids)
    ids = ids[~np.isin(ids, removed, assume_unique=True)]
    pos = _positions(main, ids)
    in_main = pos >= 0
    picked = sketch.best(query, pos[in_main], count)
    main_ids = ids[in_main][picked]
    main_scores = _inner_products(main, query, pos[in_main][picked])
    if in_main.all():
        return main_ids, main_scores
    rest_ids, rest_scores = score(parts, removed, query, ids[~in_main])
    return np.concatenate([main_ids, rest_ids]), np.concatenate([main_scores, rest_scores])


def stored_rows(part: Any) -> np.ndarray:
    """The float32 vectors of ``part`` (a flat or HNSW ``IndexIDMap``), in place."""
    inner = index_kinds.FAISS.downcast_index(part.index)
    if isinstance(inner, index_kinds.FAISS.IndexHNSW):
        inner = index_kinds.FAISS.downcast_index(inner.storage)
    n, d = int(inner.ntotal), int(inner.d)
    return faiss.rev_swig_ptr(inner.get_xb(), n * d).reshape(n, d)


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
    """Where each of ``ids`` sits in ``part`` (an ``IndexIDMap``, ids increasing), else -1."""
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
    return _subset_products(inner, np.asarray(query, np.float32)[None, :], pos)[0]


def _flat_storage(part: Any) -> Any | None:
    """The ``IndexFlat`` holding a flat or HNSW segment's vectors (else None)."""
    if not part.ntotal or isinstance(part, CompressedIndex):
        return None
    inner = index_kinds.FAISS.downcast_index(part.index)
    if isinstance(inner, index_kinds.FAISS.IndexHNSW):
        inner = index_kinds.FAISS.downcast_index(inner.storage)
    return inner if isinstance(inner, index_kinds.FAISS.IndexFlat) else None


def _subset_products(storage: Any, queries: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Each query row's inner products with ``storage``'s vectors at ``pos``, in place."""
    q = np.ascontiguousarray(queries, np.float32)
    out = np.empty((q.shape[0], pos.size), np.float32)
    labels = np.ascontiguousarray(np.broadcast_to(np.asarray(pos, np.int64), out.shape))
    storage.compute_distance_subset(
        q.shape[0], faiss.swig_ptr(q), pos.size, faiss.swig_ptr(out), faiss.swig_ptr(labels)
    )
    return out
