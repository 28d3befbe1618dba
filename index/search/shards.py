"""A gallery's photo vectors split into shards (photo ``i`` in shard ``i mod S``), each
its own ``VectorIndex`` snapshot, and a front (``ShardedIndex``) that calls every shard
through a ``Fanout`` and merges their best ``k``. Later adds and removes are pushed to the
shards, kept in memory until ``write_shards`` runs again.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from groundsearch.common.files import write_text
from groundsearch.index.errors import StoreError
from groundsearch.index.search.index_kinds import (
    AUTO,
    INDEX_KINDS,
    IndexSettings,
    choose_kind,
    choose_rerank,
    disk_free,
)
from groundsearch.index.search.vectors import VectorIndex, as_additions, check_after, check_k
from groundsearch.index.store import records
from groundsearch.index.store.records import DB_FILE, Records, as_matrix

log = logging.getLogger("groundsearch.index")
#: How photos are assigned to shards.
SCHEME = "id mod shards"
MANIFEST = "shards.json"
#: The sharded index (the records call it ``images``).
TABLE = "images"
#: The kinds that need no training sample (every other kind is trained: ivfpq, …).
UNTRAINED = ("flat", "hnsw")
#: Vectors read from the records at a time while writing a shard.
READ_CHUNK = 50_000
Hits = list[tuple[int, float]]


def shard_of(ids: np.ndarray | Sequence[int], shards: int) -> np.ndarray:
    """The shard of each id (``id mod shards``)."""
    return np.asarray(ids, np.int64) % shards


def split_ids(ids: np.ndarray | Sequence[int], shards: int) -> list[np.ndarray]:
    """``ids`` (int64, order kept) split by shard."""
    arr = np.asarray(ids, np.int64)
    owner = shard_of(arr, shards)
    return [arr[owner == s] for s in range(shards)]


def merge_hits(parts: Sequence[Sequence[tuple[int, float]]], k: int) -> Hits:
    """The best ``k`` of several shards' hits: highest score first, ties by smaller id."""
    every = [(int(i), float(s)) for part in parts for i, s in part]
    every.sort(key=lambda hit: (-hit[1], hit[0]))
    return every[:k]


@dataclass(frozen=True)
class ShardSet:
    """What ``shards.json`` says: ``shards`` shards of a gallery's photo vectors in
    ``folder``, written from its records up to ``last_id`` / ``last_removal``."""

    folder: Path
    shards: int
    dim: int
    kind: str
    identity: dict[str, str]
    last_id: int
    last_removal: int
    counts: tuple[int, ...]
    scheme: str = SCHEME

    def stem(self, shard: int) -> Path:
        return self.folder / f"shard-{shard}" / TABLE

    def header(self, shard: int) -> dict[str, Any]:
        """What shard ``shard``'s snapshot must say (``VectorIndex.load`` checks it)."""
        header = {"identity": self.identity, "dim": self.dim, "table": TABLE}
        return header | {"scheme": self.scheme, "shards": self.shards, "shard": shard}

    def write(self) -> None:
        doc = {k: v for k, v in asdict(self).items() if k != "folder"}
        write_text(self.folder / MANIFEST, json.dumps(doc, indent=2) + "\n")

    @classmethod
    def read(cls, folder: Path) -> ShardSet:
        """The shards in ``folder``; StoreError if there are none or they are unreadable."""
        folder = Path(folder)
        path = folder / MANIFEST
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("scheme") != SCHEME:
                raise StoreError(f"{path}: unknown shard scheme {doc.get('scheme')!r}")
            return cls(
                folder=folder,
                shards=int(doc["shards"]),
                dim=int(doc["dim"]),
                kind=str(doc["kind"]),
                identity=dict(doc["identity"]),
                last_id=int(doc["last_id"]),
                last_removal=int(doc["last_removal"]),
                counts=tuple(int(c) for c in doc["counts"]),
            )
        except FileNotFoundError:
            raise StoreError(
                f"no shards at {folder} (write them with `groundsearch shard --index GALLERY "
                f"--shards N --out {folder}`)"
            ) from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StoreError(f"{path} is unreadable ({exc}): write the shards again") from None


def write_shards(
    gallery: Path,
    out: Path,
    shards: int,
    kind: str | None = None,
    settings: IndexSettings | None = None,
    progress: Callable[[str], None] | None = None,
) -> ShardSet:
    """Split the gallery's photo vectors into ``shards`` snapshots in ``out``, the manifest
    last (``kind``: default the gallery's)."""
    if not isinstance(shards, int) or isinstance(shards, bool) or shards < 1:
        raise ValueError(f"shards must be a positive int, got {shards!r}")
    if kind is not None and kind not in (AUTO, *INDEX_KINDS):
        raise ValueError(f"kind must be one of {(AUTO, *INDEX_KINDS)}, got {kind!r}")
    settings = settings or IndexSettings()
    out = Path(out)
    db_records = Records.open(Path(gallery) / DB_FILE, migrate=False)
    try:
        meta = db_records.meta
        dim, identity = int(meta["dim"]), dict(meta["identity"])
        wanted = kind or str(meta["kind"])
        with db_records.snapshot() as db:
            n = records.count(db, TABLE)
            last_id, last_removal = records.last_id(db, TABLE), records.last_removal(db)
            per_shard = math.ceil(n / shards)
            chosen = wanted
            if wanted == AUTO:  # by a shard's size, and what every shard's copies take
                free = disk_free(out)
                chosen = choose_kind(per_shard, dim, free, settings.rerank, stored=n)
                if chosen == "ivfpq":
                    rerank = choose_rerank(n, dim, free, settings.rerank)
                    settings = replace(settings, rerank=rerank)
            sample = np.empty((0, dim), np.float32)
            if chosen not in UNTRAINED:  # one sample of the whole gallery trains every shard
                sample = records.sample_vectors(db, TABLE, settings.train_size(per_shard), dim)
            counts = []
            shard_set = ShardSet(out, shards, dim, chosen, identity, last_id, last_removal, ())
            for s in range(shards):
                stem = shard_set.stem(s)
                chunks = _shard_chunks(db, s, shards, dim)
                index = VectorIndex.build(dim, chosen, per_shard, sample, chunks, stem, settings)
                index.last_removal = last_removal
                index.save(stem, shard_set.header(s))
                counts.append(len(index))
                if progress is not None:
                    progress(f"shard {s}: {len(index)} photos, {index.describe()}")
    finally:
        db_records.close()
    done = ShardSet(out, shards, dim, chosen, identity, last_id, last_removal, tuple(counts))
    done.write()
    return done


def _shard_chunks(
    db: Any, shard: int, shards: int, dim: int
) -> Iterator[tuple[list[int], np.ndarray]]:
    """Every photo vector of ``shard`` in id order, read ``READ_CHUNK`` at a time."""
    for ids, vectors in records.chunks(db, TABLE, dim, READ_CHUNK):
        mine = shard_of(ids, shards) == shard
        if mine.any():
            yield np.asarray(ids, np.int64)[mine].tolist(), vectors[mine]


class Shard:
    """One shard's index, answering the front with plain data (a Ray Serve replica's)."""

    def __init__(self, index: VectorIndex, shard: int, shards: int) -> None:
        self.index, self.shard, self.shards = index, shard, shards

    @classmethod
    def open(cls, shard_set: ShardSet, shard: int, settings: IndexSettings | None = None) -> Shard:
        """Shard ``shard`` from its snapshot; StoreError if missing or for other shards."""
        if not 0 <= shard < shard_set.shards:
            raise ValueError(f"shard must be in [0, {shard_set.shards}), got {shard}")
        index = VectorIndex.load(shard_set.stem(shard), shard_set.header(shard))
        if index is None:
            raise StoreError(
                f"shard {shard} at {shard_set.stem(shard).parent} is missing or does not match "
                f"{shard_set.folder / MANIFEST}: write the shards again"
            )
        if settings is not None:
            index.settings = settings
        return cls(index, shard, shard_set.shards)

    def info(self) -> dict[str, Any]:
        idx = self.index
        info: dict[str, Any] = {"shard": self.shard, "live": len(idx)}
        info |= {f: getattr(idx, f) for f in ("total", "tombstones", "delta", "kind", "built")}
        return info | {"describe": idx.describe(), "rss_mb": _rss_mb()}

    def search(self, queries: np.ndarray, k: int, settings: IndexSettings | None) -> list[Hits]:
        return self.index.search(queries, k, settings)

    def score_likeliest(
        self, query: np.ndarray, ids: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.index.score_likeliest(query, ids, k)

    def held(self, ids: np.ndarray) -> np.ndarray:
        return self.index.held(ids)

    def search_among(
        self, query: np.ndarray, k: int, ids: np.ndarray, settings: IndexSettings | None
    ) -> Hits:
        return self.index.search_among(query, k, ids, settings)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> int:
        """Add the photos among ``ids`` this shard owns and lacks (a restarted front sends
        them again); returns how many it added."""
        ids = np.asarray(ids, np.int64)
        keep = (shard_of(ids, self.shards) == self.shard) & (ids > self.index.last_id)
        if keep.any():
            self.index.add(ids[keep].tolist(), np.asarray(vectors)[keep])
        return int(keep.sum())

    def remove(self, ids: np.ndarray) -> None:
        ids = np.asarray(ids, np.int64)
        self.index.remove(ids[shard_of(ids, self.shards) == self.shard].tolist())


def _rss_mb() -> float | None:
    """This process's resident memory (Linux), for ``info``."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


class Fanout(Protocol):
    """Calls one ``Shard`` method on every shard at once with ``args[s]`` (None: not
    called, answer None); the answers in shard order."""

    shards: int

    def call(self, method: str, args: Sequence[tuple[Any, ...] | None]) -> list[Any]: ...


class LocalFanout:
    """A ``Fanout`` over ``Shard``s in this process, on threads (tests, one machine)."""

    def __init__(self, shards: Sequence[Shard]) -> None:
        self.members = list(shards)
        self.shards = len(self.members)
        self._pool = ThreadPoolExecutor(max(1, self.shards), thread_name_prefix="shard")

    def call(self, method: str, args: Sequence[tuple[Any, ...] | None]) -> list[Any]:
        futures = [
            None if a is None else self._pool.submit(getattr(shard, method), *a)
            for shard, a in zip(self.members, args, strict=True)
        ]
        return [None if f is None else f.result() for f in futures]

    def close(self) -> None:
        self._pool.shutdown(wait=False)


class ShardedIndex:
    """The shards of a ``ShardSet`` searched through ``fanout`` as one ``VectorIndex``."""

    def __init__(
        self, fanout: Fanout, shard_set: ShardSet, settings: IndexSettings | None = None
    ) -> None:
        if fanout.shards != shard_set.shards:
            raise ValueError(f"{fanout.shards} shard servers for {shard_set.shards} shards")
        self.fanout, self.shard_set = fanout, shard_set
        self.dim, self.kind = shard_set.dim, shard_set.kind
        self.settings = settings or IndexSettings()
        self.last_id, self.last_removal = shard_set.last_id, shard_set.last_removal
        self._infos: list[dict[str, Any]] = []
        self._read_infos()

    def _read_infos(self) -> None:
        self._infos = self.fanout.call("info", [()] * self.fanout.shards)

    def __len__(self) -> int:
        return sum(int(i["live"]) for i in self._infos)

    def __repr__(self) -> str:
        return f"ShardedIndex(shards={self.fanout.shards}, kind={self.kind!r}, live={len(self)})"

    tombstones = property(lambda self: sum(int(i["tombstones"]) for i in self._infos))
    total = property(lambda self: sum(int(i["total"]) for i in self._infos))

    @property
    def built(self) -> bool:
        return all(bool(i["built"]) for i in self._infos)

    def delta_due(self) -> bool:
        return False  # the front never rebuilds: write the shards again

    def describe(self) -> str:
        parts = "; ".join(str(i["describe"]) for i in self._infos)
        return f"{self.fanout.shards} shards ({self.shard_set.scheme}): {parts}"

    def add(self, ids: Any, vectors: np.ndarray) -> None:
        id_arr, arr = as_additions(ids, vectors, self.dim)
        if not id_arr.size:
            return
        check_after(id_arr, self.last_id)
        owner = shard_of(id_arr, self.fanout.shards)
        args: list[tuple[Any, ...] | None] = [
            (id_arr[owner == s], arr[owner == s]) if (owner == s).any() else None
            for s in range(self.fanout.shards)
        ]
        self.fanout.call("add", args)
        self.last_id = int(id_arr[-1])
        self._read_infos()

    def remove(self, ids: Any) -> None:
        parts = split_ids([int(i) for i in ids], self.fanout.shards)
        if any(p.size for p in parts):
            self.fanout.call("remove", [(p,) if p.size else None for p in parts])
            self._read_infos()

    def search(
        self, queries: np.ndarray, k: int, settings: IndexSettings | None = None
    ) -> list[Hits]:
        """Every shard's ``k`` best for each query row, merged (``merge_hits``)."""
        arr = as_matrix(queries, self.dim, "queries")
        check_k(k)
        settings = settings or self.settings
        answers = self.fanout.call("search", [(arr, int(k), settings)] * self.fanout.shards)
        return [merge_hits([a[row] for a in answers], int(k)) for row in range(arr.shape[0])]

    def search_arrays(
        self, queries: np.ndarray, k: int, settings: IndexSettings | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``search``'s answer as (scores, ids) rows, ids of -1 where fewer were found."""
        found = self.search(queries, k, settings)
        width = max((len(hits) for hits in found), default=0)
        scores = np.full((len(found), width), -np.inf, np.float32)
        ids = np.full((len(found), width), -1, np.int64)
        for row, hits in enumerate(found):
            if hits:
                ids[row, : len(hits)], scores[row, : len(hits)] = zip(*hits, strict=True)
        return scores, ids

    def held(self, ids: np.ndarray) -> np.ndarray:
        parts = split_ids(ids, self.fanout.shards)
        answers = self.fanout.call("held", [(p,) if p.size else None for p in parts])
        found = [a for a in answers if a is not None]
        return np.sort(np.concatenate(found)) if found else np.empty(0, np.int64)

    def stored(self, ids: Sequence[int] | np.ndarray) -> np.ndarray | None:
        """None: the vectors live on the shards, and the records have them."""
        return None

    def products(self, ids: Sequence[int] | np.ndarray, weights: np.ndarray) -> np.ndarray | None:
        """None, as ``stored``: the records' vectors are multiplied instead."""
        return None

    def score_likeliest(
        self, query: np.ndarray, ids: np.ndarray, k: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every shard's ``score_likeliest`` of its ``ids``, concatenated."""
        q = as_matrix(query, self.dim, "query")
        parts = split_ids(ids, self.fanout.shards)
        args = [(q, p, int(k)) if p.size else None for p in parts]
        answers = self.fanout.call("score_likeliest", args)
        found = [a for a in answers if a is not None and a[0].size]
        if not found:
            return np.empty(0, np.int64), np.empty(0, np.float32)
        return np.concatenate([a[0] for a in found]), np.concatenate([a[1] for a in found])

    def search_among(
        self, query: np.ndarray, k: int, ids: np.ndarray, settings: IndexSettings | None = None
    ) -> Hits:
        arr = as_matrix(query, self.dim, "query")
        check_k(k)
        settings = settings or self.settings
        parts = split_ids(ids, self.fanout.shards)
        answers = self.fanout.call(
            "search_among", [(arr, int(k), p, settings) if p.size else None for p in parts]
        )
        return merge_hits([a for a in answers if a], int(k))

    def save(self, stem: Path, header: dict[str, Any]) -> None:
        raise StoreError("a sharded index is written by write_shards, not snapshotted")
