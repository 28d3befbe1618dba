"""A gallery's two FAISS indexes, loaded from their snapshots (or built from the records)
and kept up with the records; maintenance rebuilds and snapshots them when due."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from groundsearch.index.search.index_kinds import (
    AUTO,
    COMPRESSED,
    INDEX_KINDS,
    IndexSettings,
    choose_kind,
    choose_rerank,
    disk_free,
)
from groundsearch.index.search.shards import ShardedIndex
from groundsearch.index.search.snapshots import clear_leftovers
from groundsearch.index.search.vectors import VectorIndex
from groundsearch.index.store import records
from groundsearch.index.store.records import Records

log = logging.getLogger("groundsearch.index")
#: The search indexes, by the name the records use.
VECTOR_KINDS = ("images", "captions")
#: Compact (rebuild) a search index once removed vectors are this share of it…
COMPACT_SHARE = 0.2
#: … and at least this many.
COMPACT_MIN = 1000
#: Snapshot the search indexes after this many changes since the last snapshot.
SNAPSHOT_EVERY = 20_000
#: What the gallery searches: its own index, or the front over the shards of its photos.
SearchIndex = VectorIndex | ShardedIndex


class SearchIndexes:
    """The ``images`` and ``captions`` indexes over ``records``, snapshotted in ``folder``."""

    def __init__(
        self,
        folder: Path,
        records: Records,
        read_only: bool = False,
        settings: IndexSettings | None = None,
        given: dict[str, SearchIndex] | None = None,
    ) -> None:
        self.folder, self.records, self.read_only = Path(folder), records, read_only
        self._given = dict(given or {})
        meta = records.meta
        self.dim, self.kind = int(meta["dim"]), str(meta["kind"])
        self.identity: dict[str, str] = meta["identity"]
        #: the approximate kinds' shape and this process's search settings
        self.settings = settings or IndexSettings()
        self._snapshot_seen: dict[str, int] = {}
        self._indexes = {kind: self._load(kind) for kind in VECTOR_KINDS}
        self._refresh_lock = threading.Lock()
        self._changes = 0
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        #: called inside each refresh with its read snapshot (the filter columns follow)
        self.listeners: list[Callable[[sqlite3.Connection], int]] = []
        self.refresh()

    def __getitem__(self, kind: str) -> SearchIndex:
        return self._indexes[kind]

    def counts(self) -> dict[str, int]:
        return {kind: len(index) for kind, index in self._indexes.items()}

    def describe(self) -> dict[str, str]:
        """What each index is now, e.g. ``IVF1024,PQ64,Refine(SQfp16) + 12 exact``."""
        return {kind: index.describe() for kind, index in self._indexes.items()}

    def clear_leftovers(self) -> None:
        """Delete the temp and replaced files of interrupted or superseded snapshots."""
        clear_leftovers(self.folder, VECTOR_KINDS)

    def _header(self, kind: str) -> dict[str, object]:
        return dict(identity=self.identity, dim=self.dim, gallery_kind=self.kind, table=kind)

    def _load(self, kind: str) -> SearchIndex:
        if kind in self._given:
            return self._given[kind]
        stem = self.folder / kind
        self._snapshot_seen[kind] = _mtime(stem.with_suffix(".json"))
        index = VectorIndex.load(stem, self._header(kind))
        if index is not None:
            index.settings = self.settings  # this process's search settings, not the writer's
            with self.records.snapshot() as db:
                stale = index.last_id > records.last_id(db, kind) or (
                    index.last_removal > records.last_removal(db)
                )
            if not stale:
                return index
            log.warning("the %s snapshot is newer than the records: rebuilding it", kind)
        return self._build(kind)

    def _kind_for(self, n: int, current: str | None = None) -> str:
        """The kind for ``n`` vectors: the gallery's, or by size when ``auto`` (a smaller
        kind only below half its threshold; ``ivfopq`` when the disk is short)."""
        if self.kind != AUTO:
            return self.kind
        wanted = choose_kind(n, self.dim, _free_bytes(self.folder), self.settings.rerank)
        if current in COMPRESSED and wanted in COMPRESSED:
            return current
        if current is not None and INDEX_KINDS.index(wanted) < INDEX_KINDS.index(current):
            bigger = INDEX_KINDS.index(choose_kind(2 * n)) >= INDEX_KINDS.index(current)
            return current if bigger else wanted
        return wanted

    def _build(self, kind: str) -> VectorIndex:
        """A fresh index of every live vector (a compressed one trained on a sample)."""
        with self.records.snapshot() as db:
            n = records.count(db, kind)
            chosen = self._kind_for(n)
            settings = self._settings_for(chosen, n)
            sample = np.empty((0, self.dim), np.float32)
            if chosen in COMPRESSED:
                sample = records.sample_vectors(db, kind, settings.train_size(n), self.dim)
            last_removal = records.last_removal(db)
            stem = None if self.read_only else self.folder / kind
            chunks = records.chunks(db, kind, self.dim)
            # a build interrupted with the same vectors resumes (compressed kinds)
            key = json.dumps([self.identity, kind, last_removal], sort_keys=True)
            index = VectorIndex.build(self.dim, chosen, n, sample, chunks, stem, settings, key=key)
        index.settings = self.settings  # this process's search settings (the store: its files)
        index.last_removal = last_removal
        return index

    def _settings_for(self, kind: str, n: int) -> IndexSettings:
        """Build settings: with ``auto``, an ``ivfpq`` store the disk can hold."""
        if self.kind != AUTO or kind != "ivfpq":
            return self.settings
        wanted = self.settings.rerank
        rerank = choose_rerank(n, self.dim, _free_bytes(self.folder), wanted)
        if rerank == wanted:
            return self.settings
        log.info("the disk is short for %s re-rank copies: storing them as %s", wanted, rerank)
        return replace(self.settings, rerank=rerank)

    def refresh(self) -> int:
        """Bring the indexes up to the committed records; returns the changes read."""
        with self._refresh_lock:
            changes = 0
            with self.records.snapshot() as db:
                since = min(index.last_removal for index in self._indexes.values())
                removals = records.removals_after(db, since)
                for kind, index in self._indexes.items():
                    # removals first: they name ids this index held before this refresh
                    mine = [i for seq, k, i in removals if k == kind and seq > index.last_removal]
                    index.remove(mine)
                    if removals:
                        index.last_removal = max(index.last_removal, removals[-1][0])
                    ids, vectors = records.vectors_after(db, kind, index.last_id, self.dim)
                    if ids:
                        index.add(ids, vectors)
                    changes += len(ids) + len(mine)
                for listener in self.listeners:
                    listener(db)
            self._changes += changes
            return changes

    def follow(self, every: float = 1.0) -> None:
        """Refresh, compact and snapshot every ``every`` seconds in a background thread."""
        if self._follower is not None:
            return

        def loop() -> None:
            while not self._stop.wait(every):
                try:
                    self.refresh()
                    self.maintain()
                except Exception:  # a transient error must not stop following
                    log.exception("could not refresh the gallery from its records")

        self._follower = threading.Thread(target=loop, name="gallery-follow", daemon=True)
        self._follower.start()

    def maintain(self, snapshot_every: int = SNAPSHOT_EVERY) -> None:
        """Rebuild an index with many removals, a large delta or the wrong kind; snapshot
        after many changes (a read-only process takes up the writer's snapshots)."""
        for kind, index in self._indexes.items():
            if self.read_only:
                self._take_up_snapshot(kind)
            elif (
                index.tombstones >= max(COMPACT_MIN, COMPACT_SHARE * index.total)
                or index.delta_due()
                or self._kind_for(len(index), index.kind) != index.kind
            ):
                self.compact(kind)
        if self._changes >= snapshot_every and not self.read_only:
            self.snapshot()

    def _take_up_snapshot(self, kind: str) -> None:
        """Load the writer's snapshot of ``kind`` if it changed since this process looked."""
        stem = self.folder / kind
        seen = _mtime(stem.with_suffix(".json"))
        if seen == self._snapshot_seen.get(kind) or kind in self._given:
            return
        self._snapshot_seen[kind] = seen
        index = VectorIndex.load(stem, self._header(kind))
        if index is None:
            return
        index.settings = self.settings
        with self._refresh_lock:
            self._indexes[kind] = index
        self.refresh()
        log.info("took up the writer's %s index: %s", kind, index.describe())

    def compact(self, kind: str) -> None:
        """Rebuild one index without its removed vectors (searches go on meanwhile)."""
        fresh = self._build(kind)
        with self._refresh_lock:
            self._indexes[kind] = fresh
        self.refresh()
        if fresh.sealed:  # name the new main in a snapshot now (other processes load it)
            self.snapshot()
        log.info("rebuilt the %s index: %d vectors, %s", kind, len(fresh), fresh.describe())

    def snapshot(self) -> None:
        """Write both indexes to ``folder`` (a later open reads them, not the records)."""
        if self.read_only:
            return
        self._changes = 0
        for kind, index in self._indexes.items():
            index.save(self.folder / kind, self._header(kind))

    def close(self, snapshot: bool = True) -> None:
        """Stop following; write snapshots if anything changed since the last."""
        self._stop.set()
        if self._follower is not None:
            self._follower.join(timeout=10)
        fresh = self._changes or not (self.folder / "images.json").exists()
        if snapshot and fresh and not self.read_only:
            try:
                self.snapshot()
            except OSError as exc:  # a read-only gallery: the next start rebuilds
                log.warning("could not snapshot the search indexes: %s", exc)


def _free_bytes(folder: Path) -> int | None:
    """Free bytes on the disk of ``folder`` (``disk_free``; tests make it short)."""
    return disk_free(folder)


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0
