"""A gallery in the format before the database (two FAISS store folders) is moved into
one by ``groundsearch index --index G --migrate``, uploads and captions included."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest

from groundsearch.index.errors import StoreError
from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.migrate import migrate_legacy
from tests.index.synthetic import search_images

ID = {"checkpoint_sha256": "d" * 64}


def write_store(folder: Path, vectors: np.ndarray, items: list, tombstones=()) -> None:
    """A store folder exactly as the old ``VectorStore.save`` wrote it."""
    folder.mkdir(parents=True)
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(vectors, np.arange(len(vectors), dtype=np.int64))
    faiss.write_index(index, str(folder / "index.faiss"))
    doc = {
        "format": 1,
        "dim": vectors.shape[1],
        "kind": "flat",
        "identity": ID,
        "next_id": len(vectors),
        "items": items,
        "tombstones": list(tombstones),
    }
    (folder / "meta.json").write_text(json.dumps(doc))


def test_an_old_gallery_is_migrated_whole(tmp_path):
    data = tmp_path / "data"
    (data / "Images").mkdir(parents=True)
    (data / "Images" / "a.jpg").write_bytes(b"photo a")
    (data / "Images" / "b.jpg").write_bytes(b"photo b")
    g = tmp_path / "g"
    (g / "uploads").mkdir(parents=True)
    (g / "uploads" / "0123.png").write_bytes(b"uploaded")
    v = np.eye(6, dtype=np.float32)
    images = [
        [0, {"file": "a.jpg", "captions": ["x"], "source": str(data)}],
        [1, {"file": "b.jpg", "captions": [], "source": str(data)}],
        [2, {"file": "uploads/0123.png", "captions": ["y", "z"], "source": "upload"}],
    ]
    captions = [
        [0, {"text": "x", "image": "a.jpg", "image_id": 0}],
        [1, {"text": "y", "image": "uploads/0123.png", "image_id": 2}],
        [2, {"text": "z", "image": "uploads/0123.png", "image_id": 2}],
    ]
    write_store(g / "images", v[:3], images)
    write_store(g / "captions", v[3:], captions)
    with pytest.raises(StoreError, match="old format"):
        Gallery.open(g, ID)
    assert migrate_legacy(g) == {"images": 3, "captions": 3}
    gallery = Gallery.open(g, ID)
    assert gallery.counts() == {"images": 3, "captions": 3}
    by_file = {gallery.image(i).file: gallery.image(i) for i in gallery.image_ids()}
    assert by_file["0123.png"].uploaded and by_file["0123.png"].captions == ("y", "z")
    assert gallery.photo_path(by_file["0123.png"].id).read_bytes() == b"uploaded"
    assert gallery.photo_path(by_file["a.jpg"].id) == data / "Images" / "a.jpg"
    found = search_images(gallery, v[1], 1)[0]
    hit, score = found.record, found.score
    assert hit.file == "b.jpg" and score == pytest.approx(1.0)
    gallery.close()
    assert (g / "legacy" / "images" / "meta.json").is_file()
    with pytest.raises(StoreError, match="no gallery in the old format"):
        migrate_legacy(g)
