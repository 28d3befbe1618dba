"""A ``VectorIndex``'s snapshot: ``NAME.json`` names the segment files and is replaced
after them (one writer a folder: ``snapshot.lock``); a missing one means a rebuild."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.common.files import sync, write_text
from groundsearch.index.search import compressed, index_kinds
from groundsearch.index.search.compressed import CompressedIndex
from groundsearch.index.search.index_kinds import IndexSettings
from groundsearch.index.store.upload_files import flocked

__all__ = ["Snapshot", "build_main", "clear_leftovers", "read", "write", "write_main"]

log = logging.getLogger("groundsearch.index")
LOCK_FILE = "snapshot.lock"
#: A sealed main (``NAME-<random>.main.faiss``) younger than this is kept even when no
#: JSON names it yet: it is written before the snapshot that names it.
KEEP_YOUNG_S = 600


@dataclass
class Snapshot:
    """What a snapshot holds of an index: shape, watermarks, tombstones and segments."""

    dim: int
    kind: str
    sealed: bool
    settings: IndexSettings
    last_id: int
    last_removal: int
    tombstones: list[int]
    main: Any = None
    main_file: str | None = None
    delta: Any = None


def write(stem: Path, header: dict[str, Any], snapshot: Snapshot) -> None:
    """Write ``snapshot`` as ``stem.json`` with the FAISS files it names, then delete the
    ones it replaced (one writer at a time, across processes)."""
    doc = {
        **header,
        "dim": snapshot.dim,
        "kind": snapshot.kind,
        "sealed": snapshot.sealed,
        "settings": vars(snapshot.settings),
        "last_id": snapshot.last_id,
        "last_removal": snapshot.last_removal,
        "tombstones": snapshot.tombstones,
    }
    main_file = snapshot.main_file
    token = uuid.uuid4().hex[:12]
    with flocked(stem.parent / LOCK_FILE):
        if snapshot.main is not None:
            main_file = f"{stem.name}-{token}.faiss"
            _write_synced(snapshot.main, stem.with_name(main_file))
        if snapshot.delta is not None:
            doc["delta"] = f"{stem.name}-{token}.delta.faiss"
            _write_synced(snapshot.delta, stem.with_name(doc["delta"]))
        write_text(stem.with_suffix(".json"), json.dumps({**doc, "file": main_file}))
        _clear_unreferenced(stem)


def read(stem: Path, header: dict[str, Any]) -> Snapshot | None:
    """The snapshot at ``stem`` if its header matches ``header``, else None."""
    try:
        doc = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
        if any(doc.get(key) != value for key, value in header.items()):
            return None
        snapshot = Snapshot(
            int(doc["dim"]),
            str(doc["kind"]),
            bool(doc.get("sealed", False)),
            IndexSettings(**doc.get("settings", {})),
            int(doc["last_id"]),
            int(doc["last_removal"]),
            [int(i) for i in doc["tombstones"]],
        )
        if doc.get("file"):
            path = stem.with_name(doc["file"])
            if snapshot.sealed and path.with_name(path.name + ".ids").exists():
                snapshot.main = CompressedIndex.open(path)
            else:  # flat, hnsw, or a compressed main written before the sharded build
                snapshot.main = index_kinds.read(path, mmap=snapshot.sealed)
                if not isinstance(snapshot.main, faiss.IndexIDMap):
                    return None
            if snapshot.main.d != snapshot.dim:
                return None
            snapshot.main_file = doc["file"]
        if doc.get("delta"):
            snapshot.delta = faiss.read_index(str(stem.with_name(doc["delta"])))
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None
    return snapshot


def build_main(
    stem: Path | None,
    dim: int,
    kind: str,
    n: int,
    sample: np.ndarray,
    chunks: Iterable[tuple[list[int], np.ndarray]],
    settings: IndexSettings,
    key: str,
) -> tuple[CompressedIndex, str | None]:
    """A sealed compressed main and its file name: with ``stem``, built beside it
    (resumable) and mapped; without, built in a temporary folder and read into memory."""
    if stem is None:
        with tempfile.TemporaryDirectory(prefix="groundsearch-build-") as tmp:
            built = compressed.build_compressed(
                dim, kind, n, sample, chunks, Path(tmp), settings, key
            )
            return CompressedIndex.open(built, mmap=False), None
    stem.parent.mkdir(parents=True, exist_ok=True)
    work = stem.with_name(f".{stem.name}.build")
    compressed.build_compressed(dim, kind, n, sample, chunks, work, settings, key)
    return _place_main(stem, work)


def _place_main(stem: Path, work: Path) -> tuple[CompressedIndex, str]:
    """Move the main built in ``work`` beside ``stem``; (it mapped, its file name)."""
    name = f"{stem.name}-{uuid.uuid4().hex[:12]}.main.faiss"
    with flocked(stem.parent / LOCK_FILE):
        compressed.move_to(work, stem.with_name(name))
    return CompressedIndex.open(stem.with_name(name)), name


def write_main(stem: Path, main: CompressedIndex) -> tuple[CompressedIndex, str] | None:
    """Write an in-memory main beside ``stem`` and map it back; None if it cannot be."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    work = stem.with_name(f".{stem.name}.write-{uuid.uuid4().hex[:8]}")
    try:
        work.mkdir()
        main.write(work / "main.faiss")
        return _place_main(stem, work)
    except OSError as exc:
        log.warning("could not write %s: %s", stem, exc)
        shutil.rmtree(work, ignore_errors=True)
        return None


def clear_leftovers(folder: Path, stems: Iterable[str]) -> None:
    """Remove what interrupted snapshot writes left in ``folder`` (safe at any time)."""
    if not folder.is_dir():
        return
    with flocked(folder / LOCK_FILE):
        for name in stems:
            _clear_unreferenced(folder / name)


def _write_synced(index: faiss.Index, path: Path) -> None:
    """Write ``index`` to ``path`` through a temporary file, synced before the rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        faiss.write_index(index, str(tmp))
        sync(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _referenced(stem: Path) -> set[str]:
    try:
        doc = json.loads(stem.with_suffix(".json").read_text(encoding="utf-8"))
        named = {str(doc[key]) for key in ("file", "delta") if doc.get(key)}
        return named | {f"{name}{suffix}" for name in named for suffix in compressed.SUFFIXES}
    except (OSError, ValueError, KeyError, TypeError):
        return set()


def _clear_unreferenced(stem: Path) -> None:
    """Delete the stem's files its JSON does not name, unless a young main (snapshot lock
    held)."""
    keep = _referenced(stem)
    now = time.time()
    for path in stem.parent.glob(f"*{stem.name}-*.faiss*"):
        with contextlib.suppress(FileNotFoundError):
            young = ".main.faiss" in path.name and now - path.stat().st_mtime < KEEP_YOUNG_S
            if path.name not in keep and not young:
                path.unlink(missing_ok=True)
    for path in stem.parent.glob(f".{stem.name}.json.*.tmp"):
        path.unlink(missing_ok=True)
