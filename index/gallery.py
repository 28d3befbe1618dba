"""A gallery: photos and captions in a SQLite database, searched through FAISS.

A gallery folder holds ``gallery.db`` (the system of record), ``index/`` (the FAISS
snapshots) and ``uploads/``; one writer and any number of ``read_only`` processes may
serve it, all following the records every second.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from groundsearch.index.errors import IdentityMismatch, StoreError, UnknownItemError
from groundsearch.index.filters import sql as filter_sql
from groundsearch.index.filters.conditions import FilterError, PhotoFilter
from groundsearch.index.filters.filtered_search import FilteredSearch
from groundsearch.index.filters.sql import DateKey
from groundsearch.index.hits import Hit, Ranking
from groundsearch.index.photo_writes import PhotoWrites
from groundsearch.index.search.index_kinds import AUTO, INDEX_KINDS, IndexSettings
from groundsearch.index.search.search_indexes import SearchIndexes
from groundsearch.index.store import records
from groundsearch.index.store.class_cache import ClassCache
from groundsearch.index.store.photo_metadata import PhotoMetadata
from groundsearch.index.store.records import DB_FILE, Records, as_matrix

__all__ = [
    "CaptionRecord",
    "DateKey",
    "FilterError",
    "Gallery",
    "IdentityMismatch",
    "ImageRecord",
    "PhotoFilter",
    "PhotoMetadata",
    "StoreError",
    "UnknownItemError",
]

INDEX_DIR = "index"
#: The old layout (two ``VectorStore`` folders), refused with what to run.
LEGACY_MARKERS = ("images/meta.json", "captions/meta.json")


@dataclass(frozen=True)
class ImageRecord:
    """A gallery photo: file, whether uploaded, captions and what its file says (``meta``)."""

    id: int
    path: str
    sha256: str
    uploaded: bool = False
    captions: tuple[str, ...] = ()
    meta: PhotoMetadata = field(default_factory=PhotoMetadata)

    @property
    def file(self) -> str:
        """The photo's file name (``os.path.basename``: a Path per hit costs more)."""
        return os.path.basename(self.path)


@dataclass(frozen=True)
class CaptionRecord:
    """A gallery caption and the photo it describes."""

    id: int
    text: str
    image_id: int


def is_gallery(folder: Path) -> bool:
    """Whether ``folder`` holds a gallery database."""
    return (Path(folder) / DB_FILE).is_file()


def is_legacy_gallery(folder: Path) -> bool:
    """Whether ``folder`` holds a gallery in the format before the database."""
    return not is_gallery(folder) and any((Path(folder) / m).is_file() for m in LEGACY_MARKERS)


class Gallery:
    """Photos and captions in ``folder``, searchable by inner product."""

    def __init__(self, folder: Path, indexes: SearchIndexes) -> None:
        """The gallery in ``folder`` whose records ``indexes`` (in ``folder/index``) follow."""
        self.folder, self.records = Path(folder), indexes.records
        #: the two search indexes, kept up with the records
        self.indexes = indexes
        #: uploads in, photos out (``groundsearch.index.photo_writes``)
        self.writes = PhotoWrites(self.folder, indexes)
        #: searches and counts narrowed by a ``PhotoFilter``
        self.filtered = FilteredSearch(indexes)
        self.dim, self.kind, self.identity = indexes.dim, indexes.kind, indexes.identity
        #: photos' stored classes read so far (a photo's never change once stored)
        self._classes = ClassCache(lambda ids: records.classes_of(self.records.reader(), ids))

    @classmethod
    def create(cls, folder: Path, dim: int, identity: dict[str, str], kind: str = AUTO) -> Gallery:
        """A new, empty gallery in ``folder`` (``kind``: one of ``INDEX_KINDS`` or ``auto``)."""
        if kind not in (AUTO, *INDEX_KINDS):
            raise ValueError(f"kind must be one of {(AUTO, *INDEX_KINDS)}, got {kind!r}")
        folder = Path(folder)
        _refuse_legacy(folder)
        records = Records.create(folder / DB_FILE, dim, kind, identity)
        return cls(folder, SearchIndexes(folder / INDEX_DIR, records))

    @classmethod
    def open(
        cls,
        folder: Path,
        identity: dict[str, str] | None = None,
        read_only: bool = False,
        settings: IndexSettings | None = None,
    ) -> Gallery:
        """A gallery; StoreError (IdentityMismatch) if there is none or another model built
        it. A writer clears leftovers of interrupted writes."""
        folder = Path(folder)
        _refuse_legacy(folder)
        if not is_gallery(folder):
            raise StoreError(
                f"no gallery at {folder} (make one with `groundsearch index PHOTOS "
                f"--index {folder}`)"
            )
        # a writer migrates an older format in place (records.py, "Formats")
        records = Records.open(folder / DB_FILE, identity, migrate=not read_only)
        gallery = cls(folder, SearchIndexes(folder / INDEX_DIR, records, read_only, settings))
        if not read_only:
            gallery.indexes.clear_leftovers()
            gallery.writes.clear_leftovers()
        return gallery

    @classmethod
    def open_or_create(
        cls, folder: Path, dim: int, identity: dict[str, str], kind: str = AUTO
    ) -> Gallery:
        if is_gallery(folder):
            return cls.open(folder, identity)
        return cls.create(folder, dim, identity, kind)

    def close(self, snapshot: bool = True) -> None:
        """Stop following; snapshot the search indexes if anything changed since the last."""
        self.indexes.close(snapshot)
        self.records.close()

    def counts(self) -> dict[str, int]:
        return self.indexes.counts()

    def image_records(self, ids: Sequence[int]) -> dict[int, ImageRecord]:
        """The records of these photos (ids gone from the gallery are left out)."""
        db = self.records.reader()
        photos = records.photos(db, ids)
        texts = records.caption_texts(db, list(photos))
        return {
            i: ImageRecord(i, path, sha, up, tuple(t for _, t in texts.get(i, ())), meta)
            for i, (path, sha, up, meta) in photos.items()
        }

    def image(self, image_id: int) -> ImageRecord:
        """The photo's record; UnknownItemError if there is none."""
        record = self.image_records([image_id]).get(image_id)
        if record is None:
            raise UnknownItemError(f"no image with id {image_id} in the gallery")
        return record

    def image_ids(self) -> list[int]:
        """Every photo's id, oldest first."""
        return records.photo_ids(self.records.reader())

    def captions_of(self, image_id: int) -> list[CaptionRecord]:
        """The captions of a photo (an index lookup)."""
        rows = records.caption_texts(self.records.reader(), [image_id]).get(image_id, [])
        return [CaptionRecord(cid, text, image_id) for cid, text in rows]

    def image_vectors(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The vectors of photos ``ids``, in order; UnknownItemError if one is gone."""
        held = self.indexes["images"].stored(ids)
        if held is not None:
            return held
        want = np.asarray(ids, np.int64).tolist()
        found = records.vectors_of(self.records.reader(), "images", want)
        missing = [i for i in want if i not in found]
        if missing:
            raise UnknownItemError(f"no image with id {missing[0]} in the gallery")
        return np.stack([found[i] for i in want]) if want else np.zeros((0, self.dim))

    def image_products(self, ids: Sequence[int] | np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Photos ``ids``' inner products with each row of ``weights`` (ids × rows)."""
        found = self.indexes["images"].products(ids, weights)
        if found is not None:
            return found
        return self.image_vectors(ids).astype(np.float32) @ np.asarray(weights, np.float32).T

    def caption_products(self, ids: Sequence[int] | np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Captions ``ids``' inner products with each row of ``weights`` (a gone one: 0)."""
        found = self.indexes["captions"].products(ids, weights)
        if found is not None:
            return found
        want = np.asarray(ids, np.int64).tolist()
        stored = records.vectors_of(self.records.reader(), "captions", want)
        zero = np.zeros(self.dim, np.float32)
        rows = np.stack([stored.get(i, zero) for i in want]) if want else np.zeros((0, self.dim))
        return rows.astype(np.float32) @ np.asarray(weights, np.float32).T

    def image_classes(self, ids: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The stored classes of photos ``ids`` (a row of -1 without) and probabilities."""
        return self._classes(ids)

    def stores_classes(self) -> bool:
        """Whether the gallery holds every photo's classes."""
        return records.stores_classes(self.records.reader())

    def image_vector(self, image_id: int) -> np.ndarray:
        vector = records.vector(self.records.reader(), "images", image_id)
        if vector is None:
            raise UnknownItemError(f"no image with id {image_id} in the gallery")
        return vector

    def photo_path(self, image_id: int) -> Path:
        """The photo's file; UnknownItemError if the item or all its files are gone."""
        record = self.image(image_id)
        if record.uploaded:
            candidates = [self.folder / record.path]
        else:
            others = records.files_of(self.records.reader(), image_id)
            candidates = [Path(p) for p in [record.path, *others]]
        for path in candidates:
            if path.is_file():
                return path
        raise UnknownItemError(f"the photo of image {image_id} is no longer on disk")

    def rank_images(self, query: np.ndarray, k: int, where: PhotoFilter | None = None) -> Ranking:
        """The ``k`` photos nearest ``query`` among those passing ``where``, as arrays."""
        arr = as_matrix(query, self.dim, "query")
        if where:
            return Ranking.of(self.filtered.search(arr, k, where))
        scores, ids = self.indexes["images"].search_arrays(arr, k)
        return Ranking.found(scores[0], ids[0])

    def taken_at(self, ids: Sequence[int]) -> dict[int, float | None]:
        """When each of these photos was taken (epoch seconds or None; gone ones left out)."""
        found = records.photos(self.records.reader(), ids)
        return {i: meta.taken_at for i, (_, _, _, meta) in found.items()}

    def search_captions(self, query: np.ndarray, k: int) -> list[Hit[CaptionRecord]]:
        """The ``k`` captions nearest ``query``, with their records."""
        pairs = self.indexes["captions"].search(as_matrix(query, self.dim, "query"), k)[0]
        found = records.captions(self.records.reader(), [i for i, _ in pairs])
        return [Hit(i, s, CaptionRecord(i, *found[i])) for i, s in pairs if i in found]

    def rank_similar(self, image_id: int, k: int, where: PhotoFilter | None = None) -> Ranking:
        """The ``k`` photos nearest a gallery photo (not itself) among those passing ``where``."""
        ranking = self.rank_images(self.image_vector(image_id), k + 1, where)
        other = ranking.ids != image_id
        return Ranking(ranking.ids[other][:k], ranking.scores[other][:k])

    def images_by_date(
        self,
        k: int,
        where: PhotoFilter | None = None,
        newest_first: bool = True,
        after: DateKey | None = None,
        passing: int | None = None,
    ) -> list[ImageRecord]:
        """The ``k`` photos passing ``where`` after the key ``after``, by date taken."""
        db = self.records.reader()
        keys = filter_sql.photos_by_date(db, where, k, newest_first, after, passing)
        found = self.image_records([key.id for key in keys])
        return [found[key.id] for key in keys if key.id in found]

    @staticmethod
    def date_key(record: ImageRecord) -> DateKey:
        """Where a photo stands in ``images_by_date``'s order."""
        taken = record.meta.taken_at
        return DateKey(taken is not None, 0.0 if taken is None else float(taken), record.id)

    def count_images(self, where: PhotoFilter | None = None) -> int:
        """How many photos pass ``where`` (all of them for None)."""
        return self.filtered.count(where)


def _refuse_legacy(folder: Path) -> None:
    if is_legacy_gallery(folder):
        raise StoreError(
            f"{folder} holds a gallery in the old format (two FAISS folders, no gallery.db); "
            f"run `groundsearch index --index {folder} --migrate` to move it into the "
            f"database, or index its photos into a new folder"
        )
