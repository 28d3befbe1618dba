"""Searches narrowed by a ``PhotoFilter``, applied inside the vector search.

    search = FilteredSearch(indexes)                # a gallery's SearchIndexes
    search.search(query, k, where)                  # [(id, score)], best first
    search.count(where)                             # photos that pass

Three plans, chosen per query from the filter's estimated share of the photos (each
condition's share in a random sample of the photos' filter columns held in memory,
``records.filter_sample``, drawn again when the gallery has changed by a tenth or is
older than ``RESAMPLE_AFTER_S``):

* **exact** — few photos pass (at most ``EXACT_UP_TO``; on a ``flat`` index, at most
  ``FLAT_EXACT_SHARE`` of them): their ids come from the records' indexes
  (``records.matching_ids``) and their vectors are scored exactly from the index's own
  copies (``VectorIndex.score``: no FAISS search at all).
* **selector** — a selective filter on an approximate index: the same ids restrict the
  index's own search through a FAISS ``IDSelector`` (with the tombstones), searched
  wider as the share falls (``VectorIndex.search_among``); when it comes back short of
  ``min(k, photos passing)`` the passing photos are scored exactly instead.
* **overfetch** — a broad filter (at least ``OVERFETCH_FROM`` of the photos pass): the
  index's plain search for about ``k / share × OVERFETCH_MARGIN`` hits, the fetched ids
  checked against the filter in one statement (``records.passing_ids``); when fewer
  than ``k`` pass (the estimate was high, or the fetched ones were unlucky), the
  selector or exact plan answers instead.

So every plan answers exactly ``min(k, photos passing)`` hits, whatever the kind; the
estimate only decides how fast. "Photos passing" are those the records hold and the
index has read (a photo committed in the last second, before the follower read it, is
found by neither a filtered nor an unfiltered search yet). The figures behind the
constants are in docs/BENCHMARKS.md, "Filtered search".
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np

from groundsearch.index import records
from groundsearch.index.filters import PhotoFilter
from groundsearch.index.index_kinds import IndexSettings
from groundsearch.index.search_indexes import SearchIndexes
from groundsearch.index.vectors import VectorIndex

__all__ = ["PLANS", "FilteredSearch", "Plan"]

PLANS = ("exact", "selector", "overfetch")
Plan = str
#: Photos whose filter columns are sampled to estimate a filter's share.
SAMPLE_SIZE = 20_000
#: Draw the sample again once the gallery's size changed by this share …
RESAMPLE_CHANGE = 0.1
#: … or it is this old (metadata may be filled in place, by a backfill).
RESAMPLE_AFTER_S = 600.0
#: At most this many passing photos are scored exactly, without a FAISS search.
EXACT_UP_TO = 5_000
#: A flat index scans every vector whatever the selector: the passing photos are
#: scored exactly up to this share of them (above it, the plain search overfetches).
FLAT_EXACT_SHARE = 0.5
#: A filter passing at least this share of the photos overfetches …
OVERFETCH_FROM = 0.05
#: … this many times ``k / share`` hits (and ``OVERFETCH_PAD`` more).
OVERFETCH_MARGIN = 1.5
OVERFETCH_PAD = 10
#: A filter's search is wider: HNSW's candidate list ``GRAPH_SHARE / share`` times (the
#: selector plan; overfetching asks for more hits, which widens it already), the IVF
#: lists probed ``√(1 / share)`` times (both plans: the hits that pass lie further
#: out), neither more than ``MAX_WIDEN`` times.
GRAPH_SHARE = 0.1
MAX_WIDEN = 32.0


def widened(settings: IndexSettings, share: float, graph: bool) -> IndexSettings:
    """``settings`` for a search whose hits must pass a filter passing ``share``."""
    share = max(share, 1e-12)
    lists = min(MAX_WIDEN, math.sqrt(1 / share))
    return settings.widened(lists, min(MAX_WIDEN, GRAPH_SHARE / share) if graph else 1.0)


class FilteredSearch:
    """Filtered searches of a gallery's ``images`` index and counts of its photos."""

    def __init__(self, indexes: SearchIndexes) -> None:
        self.indexes, self.records = indexes, indexes.records
        self._sample: dict[str, Any] | None = None
        self._sampled_at = (0.0, 0)  # when, and the gallery's size then
        self._lock = threading.Lock()

    # --- estimating ---------------------------------------------------------------------------

    def sample(self) -> dict[str, Any]:
        """The sampled photos' filter columns, drawn again when stale."""
        live = len(self.indexes["images"])
        with self._lock:
            when, size = self._sampled_at
            stale = (
                self._sample is None
                or abs(live - size) > RESAMPLE_CHANGE * max(size, 1)
                or time.monotonic() - when > RESAMPLE_AFTER_S
            )
            if stale:
                with self.records.snapshot() as db:
                    self._sample = records.filter_sample(db, SAMPLE_SIZE)
                self._sampled_at = (time.monotonic(), live)
            assert self._sample is not None
            return self._sample

    def estimate(self, where: PhotoFilter) -> tuple[float, dict[str, float]]:
        """The share of the photos ``where`` passes, and about how many photos each of
        its conditions passes, from the sample."""
        sample = self.sample()
        masks = where.masks(sample)
        rows = max(len(sample["id"]), 1)
        live = len(self.indexes["images"])
        expected = {name: float(mask.sum()) / rows * live for name, mask in masks.items()}
        every = np.logical_and.reduce(list(masks.values())) if masks else np.ones(1, bool)
        return float(every.sum()) / rows if len(sample["id"]) else 1.0, expected

    def plan(self, index: VectorIndex, share: float) -> Plan:
        """The plan for a filter passing ``share`` of ``index``'s photos."""
        if index.kind == "flat" or not index.built:  # exact search either way
            return "exact" if share <= FLAT_EXACT_SHARE else "overfetch"
        if share * len(index) <= EXACT_UP_TO:
            return "exact"
        return "overfetch" if share >= OVERFETCH_FROM else "selector"

    # --- searching ----------------------------------------------------------------------------

    def count(self, where: PhotoFilter | None) -> int:
        """How many photos pass ``where`` (every photo for None or an empty filter)."""
        expected = self.estimate(where)[1] if where else None
        with self.records.snapshot() as db:
            return records.count_matching(db, where or PhotoFilter(), expected)

    def search(
        self, query: np.ndarray, k: int, where: PhotoFilter, plan: Plan | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` photos nearest to ``query`` (one vector) among those passing
        ``where`` (a non-empty filter), best first, as (id, score): exactly ``min(k,
        photos passing)`` of them. ``plan`` forces one of ``PLANS`` (benchmarks)."""
        if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        index = self.indexes["images"]
        share, expected = self.estimate(where)
        chosen = plan or self.plan(index, share)
        if chosen not in PLANS:
            raise ValueError(f"plan must be one of {PLANS}, got {chosen!r}")
        if chosen == "overfetch":
            hits = self._overfetch(index, query, int(k), where, share)
            if hits is not None:
                return hits
            chosen = "selector" if index.kind != "flat" and index.built else "exact"
        with self.records.snapshot() as db:
            ids = records.matching_ids(db, where, expected)
        if chosen == "selector" and ids.size > k:
            ids = index.held(ids)  # (``score`` leaves out the others itself)
            settings = widened(index.settings, ids.size / max(len(index), 1), graph=True)
            hits = index.search_among(query, int(k), ids, settings)
            if len(hits) >= min(k, ids.size):
                return hits
        return _top(index.score(query, ids), int(k))

    def _overfetch(
        self, index: VectorIndex, query: np.ndarray, k: int, where: PhotoFilter, share: float
    ) -> list[tuple[int, float]] | None:
        """The plain search for enough hits that ``k`` pass, checked against the
        filter; None when fewer than ``k`` pass and the index holds more."""
        live = len(index)
        fetch = min(live, math.ceil(k / max(share, 1e-6) * OVERFETCH_MARGIN) + OVERFETCH_PAD)
        hits = index.search(query, fetch, widened(index.settings, share, graph=False))[0]
        with self.records.snapshot() as db:
            passing = set(records.passing_ids(db, [i for i, _ in hits], where).tolist())
        kept = [(i, s) for i, s in hits if i in passing]
        if len(kept) >= k or len(hits) >= live:  # enough, or every photo was fetched
            return kept[:k]
        return None


def _top(scored: tuple[np.ndarray, np.ndarray], k: int) -> list[tuple[int, float]]:
    """The ``k`` best of (ids, scores), best first (ties: the older photo first)."""
    ids, scores = scored
    if ids.size > k:
        part = np.argpartition(-scores, k - 1)[:k]
        ids, scores = ids[part], scores[part]
    order = np.lexsort((ids, -scores))
    return [(int(ids[i]), float(scores[i])) for i in order]
