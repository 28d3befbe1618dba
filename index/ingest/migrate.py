"""Move a gallery of the format before the database (two FAISS store folders) into a new
``gallery.db``, renamed into place only when complete (metadata read from each file); the
old folders move into ``legacy/``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.index.errors import StoreError
from groundsearch.index.gallery import Gallery, is_legacy_gallery
from groundsearch.index.store import records
from groundsearch.index.store.photo_metadata import (
    PhotoMetadata,
    read_metadata,
    read_upload_metadata,
)
from groundsearch.index.store.records import DB_FILE, Records

IMAGES_DIR = "Images"


def _read_store(folder: Path) -> tuple[dict[str, Any], faiss.IndexIDMap2]:
    try:
        doc = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        index = faiss.read_index(str(folder / "index.faiss"))
    except (OSError, ValueError, RuntimeError) as exc:
        raise StoreError(f"cannot read the old store at {folder}: {exc}") from None
    if not isinstance(index, faiss.IndexIDMap2):
        raise StoreError(f"{folder}/index.faiss is not an old groundsearch store")
    return doc, index


def _read(path: Path, uploaded: bool) -> tuple[str | None, PhotoMetadata | None]:
    """The file's content hash and metadata (None, None when it cannot be read)."""
    try:
        data = path.read_bytes()
        meta = read_upload_metadata(data, None) if uploaded else read_metadata(path)
    except OSError:
        return None, None
    return hashlib.sha256(data).hexdigest(), meta


def migrate_legacy(folder: Path) -> dict[str, int]:
    """Migrate the old gallery in ``folder``; returns the photos and captions moved."""
    folder = Path(folder)
    if not is_legacy_gallery(folder):
        raise StoreError(f"{folder} holds no gallery in the old format")
    images, image_index = _read_store(folder / "images")
    captions, caption_index = _read_store(folder / "captions")
    tmp = folder / f".{DB_FILE}.migrating"
    for leftover in folder.glob(f".{DB_FILE}.migrating*"):
        leftover.unlink()
    dim = int(image_index.d)
    store = Records.create(tmp, dim, str(images["kind"]), dict(images["identity"]))
    new_id: dict[int, int] = {}
    with store.transaction() as db:
        for old_id, meta in images["items"]:
            uploaded = meta["source"] == "upload"
            path = (
                folder / meta["file"]
                if uploaded
                else Path(meta["source"]) / IMAGES_DIR / meta["file"]
            )
            sha, read = _read(path, uploaded)
            sha = sha or f"missing:{path}"
            photo = records.photo_of_sha(db, sha)
            if photo is None:
                vector = np.asarray(image_index.reconstruct(int(old_id)))
                stored = meta["file"] if uploaded else str(path)
                photo = records.insert_photo(db, sha, stored, vector, uploaded, read)
            new_id[int(old_id)] = photo
            if not uploaded and path.is_file():
                st = path.stat()
                records.record_file(db, str(path), photo, st.st_size, st.st_mtime_ns)
        moved = 0
        for old_id, meta in captions["items"]:
            photo = new_id.get(int(meta["image_id"]))
            if photo is None:
                continue
            vector = np.asarray(caption_index.reconstruct(int(old_id)))
            rows = [(meta["text"], records.blob(vector))]
            moved += len(records.insert_captions(db, photo, rows))
    store.close()  # the last connection: SQLite folds the WAL into the file
    if Path(f"{tmp}-wal").exists():
        raise StoreError(f"could not finish writing {tmp}; the old gallery is unchanged")
    os.replace(tmp, folder / DB_FILE)
    legacy = folder / "legacy"
    legacy.mkdir(exist_ok=True)
    for part in ("images", "captions"):
        os.replace(folder / part, legacy / part)
    Gallery.open(folder).close()  # builds and snapshots the search indexes
    return {"images": len(set(new_id.values())), "captions": moved}
