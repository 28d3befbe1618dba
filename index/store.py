"""FAISS inner-product vector store with stable ids, metadata and atomic persistence.

A store folder holds ``index.faiss`` (the FAISS index, written by ``faiss.write_index``)
and ``meta.json`` (dimension, kind, identity, next id, per-id metadata, tombstones).

``save`` writes both files into a fresh temp folder beside the target, fsyncs them,
then swaps: the old folder is renamed away, the new one renamed in, the old one deleted.
A crash at any point leaves a complete store: either the target itself, or (crash
between the two renames) the renamed-away old folder, which ``load`` falls back to.
Leftover temp folders are ignored by ``load`` and cleared by the next ``save``.

Removal: ``IndexFlatIP`` supports ``remove_ids``; ``IndexHNSWFlat`` does not (FAISS
raises "remove_ids not implemented"), so an HNSW store keeps removed vectors in the
graph and records their ids as tombstones, filtered out at search time (searches
over-fetch by the number of tombstones). Tombstones are persisted; ids are never reused.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

__all__ = [
    "IdentityMismatch",
    "SearchHit",
    "StoreError",
    "UnknownItemError",
    "VectorStore",
]

INDEX_FILE = "index.faiss"
META_FILE = "meta.json"
FORMAT_VERSION = 1
KINDS = ("flat", "hnsw")
HNSW_M = 32

SearchHit = tuple[int, float, dict[str, Any]]


class StoreError(Exception):
    """A store folder is missing, incomplete or corrupt (or cannot be written)."""


class IdentityMismatch(StoreError):
    """The stored vectors were built by something other than what the caller expects."""


class UnknownItemError(StoreError, KeyError):
    """No live item has this id (never added, or already removed)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown item"


def _json_copy(value: Any, what: str) -> Any:
    """Deep copy through JSON, so stored values are exactly what persists."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{what} must be JSON-serialisable: {err}") from err


def _new_index(dim: int, kind: str) -> faiss.IndexIDMap2:
    inner: faiss.Index
    if kind == "flat":
        inner = faiss.IndexFlatIP(dim)
    else:
        inner = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    return faiss.IndexIDMap2(inner)


def _fsync_path(path: Path) -> None:
    """fsync a file or directory (directories: best effort, not all platforms allow it)."""
    flags = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)) if path.is_dir() else os.O_RDONLY
    try:
        fd = os.open(path, flags)
    except OSError:
        if path.is_dir():
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not path.is_dir():
            raise
    finally:
        os.close(fd)


def _temp_prefix(folder: Path) -> str:
    return f".{folder.name}.tmp-"


def _old_prefix(folder: Path) -> str:
    return f".{folder.name}.old-"


def _swap(tmp: Path, folder: Path) -> None:
    """Replace ``folder`` by the complete store in ``tmp`` (old away, new in, old deleted)."""
    old: Path | None = None
    if folder.exists():
        old = folder.with_name(f"{_old_prefix(folder)}{uuid.uuid4().hex}")
        os.rename(folder, old)
    os.rename(tmp, folder)
    _fsync_path(folder.parent)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _leftovers(folder: Path, prefix: str) -> list[Path]:
    if not folder.parent.is_dir():
        return []
    return sorted(p for p in folder.parent.iterdir() if p.name.startswith(prefix) and p.is_dir())


class VectorStore:
    """Inner-product nearest-neighbour store over float32 vectors with stable int64 ids."""

    def __init__(self, dim: int, kind: str = "flat", identity: dict[str, Any] | None = None):
        """Create an empty store of ``dim``-dimensional vectors (``kind``: flat or hnsw)."""
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self.dim = dim
        self.kind = kind
        self.identity: dict[str, Any] = _json_copy(identity or {}, "identity")
        self._index = _new_index(dim, kind)
        self._metas: dict[int, dict[str, Any]] = {}
        self._tombstones: set[int] = set()
        self._next_id = 0
        self._lock = threading.RLock()

    def __len__(self) -> int:
        """Number of live (not removed) items."""
        return len(self._metas)

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._metas

    def __repr__(self) -> str:
        return f"VectorStore(dim={self.dim}, kind={self.kind!r}, items={len(self)})"

    @property
    def ids(self) -> list[int]:
        """Live ids in insertion order."""
        return list(self._metas)

    def _check_matrix(self, x: np.ndarray, what: str) -> np.ndarray:
        arr = np.asarray(x)
        if arr.ndim != 2 or arr.shape[1] != self.dim:
            raise ValueError(f"{what} must have shape (n, {self.dim}), got {arr.shape}")
        if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
            raise ValueError(f"{what} must be real numbers, got dtype {arr.dtype}")
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if not np.isfinite(arr).all():
            bad = np.flatnonzero(~np.isfinite(arr).all(axis=1)).tolist()
            raise ValueError(f"{what} contain NaN or infinite values (rows {bad[:10]})")
        return arr

    def add(self, vectors: np.ndarray, metas: Sequence[dict[str, Any]]) -> list[int]:
        """Add ``n×dim`` vectors with one metadata dict each; return their new ids."""
        arr = self._check_matrix(vectors, "vectors")
        if len(metas) != arr.shape[0]:
            raise ValueError(f"got {arr.shape[0]} vectors but {len(metas)} metadata dicts")
        copies = []
        for i, meta in enumerate(metas):
            if not isinstance(meta, dict):
                raise ValueError(f"metas[{i}] must be a dict, got {type(meta).__name__}")
            copies.append(_json_copy(meta, f"metas[{i}]"))
        with self._lock:
            ids = list(range(self._next_id, self._next_id + arr.shape[0]))
            if ids:
                self._index.add_with_ids(arr, np.asarray(ids, dtype=np.int64))
            self._next_id += len(ids)
            self._metas.update(zip(ids, copies, strict=True))
        return ids

    def remove(self, item_id: int) -> None:
        """Remove a live item; raises ``UnknownItemError`` if there is none with this id."""
        with self._lock:
            if item_id not in self._metas:
                raise UnknownItemError(f"no item with id {item_id!r} in the store")
            if self.kind == "flat":
                ids = np.asarray([item_id], dtype=np.int64)
                removed = self._index.remove_ids(ids)  # type: ignore[arg-type]  # faiss takes ids
                if removed != 1:
                    raise StoreError(f"FAISS removed {removed} vectors for id {item_id}")
            else:
                self._tombstones.add(int(item_id))
            del self._metas[item_id]

    def get(self, item_id: int) -> dict[str, Any]:
        """Metadata of a live item (a copy); raises ``UnknownItemError`` if unknown."""
        with self._lock:
            if item_id not in self._metas:
                raise UnknownItemError(f"no item with id {item_id!r} in the store")
            return _json_copy(self._metas[item_id], "metadata")

    def vector(self, item_id: int) -> np.ndarray:
        """The stored vector of a live item; raises ``UnknownItemError`` if unknown."""
        with self._lock:
            if item_id not in self._metas:
                raise UnknownItemError(f"no item with id {item_id!r} in the store")
            return np.asarray(self._index.reconstruct(int(item_id)))

    def search(self, queries: np.ndarray, k: int) -> list[list[SearchHit]]:
        """Top-``k`` items by inner product for each query row: ``(id, score, metadata)``.

        ``k`` is clipped to the number of items; an empty store gives empty lists.
        """
        arr = self._check_matrix(queries, "queries")
        if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}")
        with self._lock:
            k_live = min(int(k), len(self._metas))
            if k_live == 0 or arr.shape[0] == 0:
                return [[] for _ in range(arr.shape[0])]
            k_fetch = min(k_live + len(self._tombstones), self._index.ntotal)
            scores, labels = self._index.search(arr, k_fetch)
            results: list[list[SearchHit]] = []
            for row_scores, row_labels in zip(scores, labels, strict=True):
                hits: list[SearchHit] = []
                for score, label in zip(row_scores, row_labels, strict=True):
                    item = int(label)
                    if item < 0 or item in self._tombstones:
                        continue
                    hits.append((item, float(score), _json_copy(self._metas[item], "metadata")))
                    if len(hits) == k_live:
                        break
                results.append(hits)
            return results

    def _meta_document(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "dim": self.dim,
            "kind": self.kind,
            "identity": self.identity,
            "next_id": self._next_id,
            "items": [[i, m] for i, m in self._metas.items()],
            "tombstones": sorted(self._tombstones),
        }

    def save(self, folder: Path | str) -> None:
        """Write the store to ``folder`` atomically (temp folder beside it, fsync, swap)."""
        folder = Path(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        for stale in _leftovers(folder, _temp_prefix(folder)):
            shutil.rmtree(stale, ignore_errors=True)
        tmp = folder.with_name(f"{_temp_prefix(folder)}{uuid.uuid4().hex}")
        with self._lock:
            try:
                tmp.mkdir()
                faiss.write_index(self._index, str(tmp / INDEX_FILE))
                with open(tmp / META_FILE, "w", encoding="utf-8") as fh:
                    json.dump(self._meta_document(), fh, allow_nan=False)
                    fh.flush()
                    os.fsync(fh.fileno())
                _fsync_path(tmp / INDEX_FILE)
                _fsync_path(tmp)
                _swap(tmp, folder)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        # A complete target now exists: backups from earlier interrupted swaps are stale.
        for stale in _leftovers(folder, _old_prefix(folder)):
            shutil.rmtree(stale, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path | str, identity: dict[str, Any] | None = None) -> VectorStore:
        """Read a store saved by ``save``; ``identity`` (if given) must equal the stored one.

        If ``folder`` is missing because a save crashed mid-swap, the renamed-away previous
        store beside it is loaded instead.
        """
        folder = Path(folder)
        source = folder
        if not folder.exists():
            backups = _leftovers(folder, _old_prefix(folder))
            if not backups:
                raise StoreError(f"no vector store at {folder} (folder does not exist)")
            source = max(backups, key=lambda p: p.stat().st_mtime)
        store = cls._read(source)
        if identity is not None:
            expected = _json_copy(identity, "identity")
            if expected != store.identity:
                raise IdentityMismatch(
                    f"vector store at {folder} was built by {store.identity!r}, "
                    f"but {expected!r} was expected; rebuild the index"
                )
        return store

    @classmethod
    def _read(cls, folder: Path) -> VectorStore:
        meta_path, index_path = folder / META_FILE, folder / INDEX_FILE
        for path in (meta_path, index_path):
            if not path.is_file():
                raise StoreError(f"vector store at {folder} is incomplete: {path.name} missing")
        try:
            doc = json.loads(meta_path.read_text(encoding="utf-8"))
            if doc.get("format") != FORMAT_VERSION:
                raise StoreError(f"unsupported format {doc.get('format')!r}")
            dim, kind = int(doc["dim"]), str(doc["kind"])
            items = {int(i): dict(m) for i, m in doc["items"]}
            tombstones = {int(i) for i in doc["tombstones"]}
            next_id = int(doc["next_id"])
            store = cls(dim, kind, dict(doc["identity"]))
        except StoreError as err:
            raise StoreError(f"vector store at {folder} has a bad {META_FILE}: {err}") from err
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise StoreError(
                f"vector store at {folder} has a corrupt {META_FILE}: {err!r}"
            ) from err
        try:
            index = faiss.read_index(str(index_path))
        except RuntimeError as err:
            raise StoreError(f"vector store at {folder} has an unreadable {INDEX_FILE}") from err
        if not isinstance(index, faiss.IndexIDMap2) or index.d != dim:
            raise StoreError(
                f"vector store at {folder}: {INDEX_FILE} is {type(index).__name__} of dim "
                f"{index.d}, expected IndexIDMap2 of dim {dim}"
            )
        inner = faiss.downcast_index(index.index)
        expected_inner = faiss.IndexFlatIP if kind == "flat" else faiss.IndexHNSWFlat
        stored_ids = set(faiss.vector_to_array(index.id_map).tolist())
        if not isinstance(inner, expected_inner) or stored_ids != set(items) | tombstones:
            raise StoreError(
                f"vector store at {folder}: {INDEX_FILE} does not match {META_FILE} "
                f"({type(inner).__name__}, {len(stored_ids)} vectors; meta says {kind}, "
                f"{len(items)} items + {len(tombstones)} tombstones)"
            )
        if any(i >= next_id for i in stored_ids) or items.keys() & tombstones:
            raise StoreError(f"vector store at {folder} has inconsistent ids in {META_FILE}")
        store._index = index
        store._metas = items
        store._tombstones = tombstones
        store._next_id = next_id
        return store
