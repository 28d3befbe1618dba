"""Synthetic galleries for the index tests: small unit vectors, indexed files."""

from __future__ import annotations

import numpy as np

from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.gallery import Gallery, ImageRecord
from groundsearch.index.hits import Hit
from groundsearch.index.ingest.indexing_runs import IndexedFile

DIM = 8
ID = {"checkpoint_sha256": "c" * 64}


def vecs(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def indexed(i: int, v: np.ndarray, captions: tuple[str, ...] = ()) -> IndexedFile:
    """``/photos/{i}.jpg`` with content ``sha-{i}``, vector ``v`` and the captions given."""
    cv = vecs(len(captions), seed=100 + i) if captions else None
    return IndexedFile(f"/photos/{i}.jpg", 10 + i, 1000 + i, f"sha-{i}", v, captions, cv)


def search_images(
    gallery: Gallery, query: np.ndarray, k: int, where: PhotoFilter | None = None
) -> list[Hit[ImageRecord]]:
    """The gallery's ranking of ``query``'s ``k`` photos, each hit with its record (those
    gone since ranked left out), as ``/arithmetic`` reads it."""
    ranking = gallery.rank_images(query, k, where)
    records = gallery.image_records(ranking.ids.tolist())
    return [Hit(i, s, records[i]) for i, s in ranking.pairs() if i in records]
