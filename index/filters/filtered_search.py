"""Searches narrowed by a ``PhotoFilter``, applied inside the vector search.

Each query's plan is chosen by its estimated cost (the filter's sampled share, per-item
costs measured at 1M photos): **exact** (the passing ids scored), **overfetch** (a plain
search for more hits, checked against the columns) or, ``ivfpq`` only, **selector** (the
passing ids restrict the IVF search). Every plan answers ``min(k, photos passing)`` hits.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np

from groundsearch.index.filters import sql as filter_sql
from groundsearch.index.filters.columns import FilterColumns
from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.search.index_kinds import COMPRESSED, IndexSettings
from groundsearch.index.search.search_indexes import SearchIndex, SearchIndexes
from groundsearch.index.search.vectors import check_k

__all__ = ["PLANS", "FilteredSearch", "Plan"]

PLANS = ("exact", "selector", "overfetch")
Plan = str
#: Photos whose filter columns are sampled to estimate a filter's share.
SAMPLE_SIZE = 20_000
#: Draw the sample again once the gallery's size changed by this share …
RESAMPLE_CHANGE = 0.1
#: … or it is this old (metadata may be filled in place, by a backfill).
RESAMPLE_AFTER_S = 600.0
#: Estimates kept (by filter, for the sample and gallery size they were made from).
ESTIMATES_KEPT = 1024
#: ``ivfpq`` scores at most this many passing photos exactly (beyond: the selector).
EXACT_UP_TO = 5_000
#: A flat index scans every vector whatever the selector: the passing photos are
#: scored exactly up to this share of them (above it, the plain search overfetches).
FLAT_EXACT_SHARE = 0.5
#: Overfetching asks for ``k / share × OVERFETCH_MARGIN + OVERFETCH_PAD`` hits, with
#: HNSW's candidate list ``OVERFETCH_GRAPH`` times as long (at least ``efSearch``);
#: when too few pass, once more for ``OVERFETCH_AGAIN`` times as many.
OVERFETCH_MARGIN = 1.5
OVERFETCH_PAD = 10
OVERFETCH_GRAPH = 0.5
OVERFETCH_AGAIN = 4
#: What each plan costs, in µs, measured at 1M photos of 690-d with HNSW (one thread,
#: ``bench/filtered_search.py``): a row of the filter columns checked for a condition
#: (the rows of the rarest condition's index: ``FilterColumns``; ``near``: its distance) …
ROW_US = {"near": 0.03}
ROW_US_OTHER = 0.01
#: … a passing photo scored (its sketch read, the likeliest then exactly:
#: ``VectorIndex.score_likeliest``) …
SCORE_US = 0.04
#: … an overfetched hit (HNSW's candidate list half a place longer, its row checked).
HIT_US = 3.2
#: The selector plan (ivfpq) probes ``√(1 / share)`` times the IVF lists, HNSW (only
#: when forced) keeps a candidate list ``GRAPH_SHARE / share`` times longer, neither
#: more than ``MAX_WIDEN`` times.
GRAPH_SHARE = 0.1
MAX_WIDEN = 32.0


def widened(settings: IndexSettings, share: float, graph: bool) -> IndexSettings:
    """``settings`` for a selector search among a share ``share`` of the photos."""
    share = max(share, 1e-12)
    lists = min(MAX_WIDEN, math.sqrt(1 / share))
    return settings.widened(lists, min(MAX_WIDEN, GRAPH_SHARE / share) if graph else 1.0)


def overfetch_settings(settings: IndexSettings, fetch: int, share: float) -> IndexSettings:
    """``settings`` for the plain search of ``fetch`` hits (``OVERFETCH_GRAPH``, √(1/share))."""
    lists = min(MAX_WIDEN, math.sqrt(1 / max(share, 1e-12)))
    return settings.widened(lists, fetch * OVERFETCH_GRAPH / settings.ef_search)


def costs(expected: dict[str, float], passing: float, fetch: int) -> tuple[float, float]:
    """The estimated µs of the exact plan and of overfetching ``fetch`` hits."""
    rows = min(expected.values(), default=0.0)
    checks = sum(rows * ROW_US.get(name, ROW_US_OTHER) for name in expected)
    return checks + passing * SCORE_US, fetch * HIT_US


class FilteredSearch:
    """Filtered searches of a gallery's ``images`` index and counts of its photos."""

    def __init__(self, indexes: SearchIndexes) -> None:
        self.indexes, self.records = indexes, indexes.records
        self._sample: dict[str, Any] | None = None
        self._sampled_at = (0.0, 0)  # when, and the gallery's size then
        self._lock = threading.Lock()
        self._estimates: dict[tuple[int, PhotoFilter], tuple[float, dict[str, float]]] = {}
        #: every photo's filter columns, following the records with the indexes (and at
        #: once after this process's own writes: ``current``)
        self._columns = FilterColumns()
        self._seen_commits = -1
        indexes.listeners.append(self._columns.refresh)
        self.current()

    def current(self) -> FilterColumns:
        """The filter columns, read up to this process's last write."""
        commits = self.records.commits
        if commits != self._seen_commits:
            with self.records.snapshot() as db:
                self._columns.refresh(db)
            self._seen_commits = commits
        return self._columns

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
                    self._sample = filter_sql.filter_sample(db, SAMPLE_SIZE)
                self._estimates.clear()
                self._sampled_at = (time.monotonic(), live)
            assert self._sample is not None
            return self._sample

    def estimate(self, where: PhotoFilter) -> tuple[float, dict[str, float]]:
        """The share of photos ``where`` passes, and each condition's count, sampled."""
        sample = self.sample()
        live = len(self.indexes["images"])
        key = (live, where)  # (the estimates are cleared when the sample is drawn again)
        known = self._estimates.get(key)
        if known is not None:
            return known
        masks = where.masks(sample)
        rows = max(len(sample["id"]), 1)
        expected = {name: float(mask.sum()) / rows * live for name, mask in masks.items()}
        every = np.logical_and.reduce(list(masks.values())) if masks else np.ones(1, bool)
        share = float(every.sum()) / rows if len(sample["id"]) else 1.0
        if len(self._estimates) >= ESTIMATES_KEPT:
            self._estimates.clear()
        self._estimates[key] = (share, expected)
        return share, expected

    def plan(self, index: SearchIndex, share: float, k: int, expected: dict[str, float]) -> Plan:
        """The plan for ``k`` hits of a filter passing ``share``: the cheaper of exact and
        overfetch (``costs``); ``ivfpq`` takes the selector instead of exact beyond
        ``EXACT_UP_TO``, a flat index exact up to ``FLAT_EXACT_SHARE``."""
        if index.kind == "flat" or not index.built:
            return "exact" if share <= FLAT_EXACT_SHARE else "overfetch"
        passing = share * len(index)
        exact, over = costs(expected, passing, overfetch_size(k, share, len(index)))
        if over < exact:
            return "overfetch"
        return "selector" if index.kind in COMPRESSED and passing > EXACT_UP_TO else "exact"

    def count(self, where: PhotoFilter | None) -> int:
        """How many photos pass ``where`` (every photo for None or an empty filter)."""
        return self.current().count(where)

    def search(
        self, query: np.ndarray, k: int, where: PhotoFilter, plan: Plan | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` photos nearest ``query`` among those passing ``where`` (non-empty),
        best first, as (id, score): exactly ``min(k, photos passing)``. ``plan`` forces one."""
        check_k(k)
        index = self.indexes["images"]
        share, expected = self.estimate(where)
        chosen = plan or self.plan(index, share, int(k), expected)
        if chosen not in PLANS:
            raise ValueError(f"plan must be one of {PLANS}, got {chosen!r}")
        if chosen == "overfetch":
            hits = self._overfetch(index, query, int(k), where, share)
            if hits is not None:
                return hits
            chosen = "selector" if index.kind in COMPRESSED and index.built else "exact"
        ids = self.current().matching(where)
        if chosen == "selector" and ids.size > k:
            ids = index.held(ids)  # (``score`` leaves out the others itself)
            settings = widened(index.settings, ids.size / max(len(index), 1), graph=True)
            hits = index.search_among(query, int(k), ids, settings)
            if len(hits) >= min(k, ids.size):
                return hits
        return _top(index.score_likeliest(query, ids, int(k)), int(k))

    def _overfetch(
        self, index: SearchIndex, query: np.ndarray, k: int, where: PhotoFilter, share: float
    ) -> list[tuple[int, float]] | None:
        """A plain search for enough hits that ``k`` pass the filter; None when fewer
        than ``k`` pass and the index holds more."""
        live = len(index)
        fetch = overfetch_size(k, share, live)
        for _ in range(2):
            settings = overfetch_settings(index.settings, fetch, share)
            hits = index.search(query, fetch, settings)[0]
            passing = set(self.current().passing([i for i, _ in hits], where).tolist())
            kept = [(i, s) for i, s in hits if i in passing]
            if len(kept) >= k or len(hits) >= live:  # enough, or every photo was fetched
                return kept[:k]
            fetch = min(live, fetch * OVERFETCH_AGAIN)
        return None


def overfetch_size(k: int, share: float, live: int) -> int:
    """How many hits overfetching asks for, so that ``k`` pass with a good margin."""
    return min(live, math.ceil(k / max(share, 1e-9) * OVERFETCH_MARGIN) + OVERFETCH_PAD)


def _top(scored: tuple[np.ndarray, np.ndarray], k: int) -> list[tuple[int, float]]:
    """The ``k`` best of (ids, scores), best first (ties: the older photo first)."""
    ids, scores = scored
    if ids.size > k:
        part = np.argpartition(-scores, k - 1)[:k]
        ids, scores = ids[part], scores[part]
    order = np.lexsort((ids, -scores))
    return [(int(ids[i]), float(scores[i])) for i in order]
