"""The photo files a gallery records where they lie: what an indexing run reads and writes.

Each call is one transaction of the records; the search indexes read it at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from groundsearch.index.gallery import Gallery
from groundsearch.index.store import records
from groundsearch.index.store.photo_metadata import PhotoMetadata
from groundsearch.index.store.records import FileState, as_matrix, caption_rows


@dataclass
class IndexedFile:
    """A photo file to record: state, hash, vector (None: content already there), captions
    with vectors, metadata and classes (None: not read)."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    vector: np.ndarray | None = None
    captions: Sequence[str] = ()
    caption_vectors: np.ndarray | None = None
    meta: PhotoMetadata | None = None
    classes: tuple[np.ndarray, np.ndarray] | None = None


@dataclass
class Added:
    """What one ``add_files`` call changed."""

    photos: int = 0
    files: int = 0
    captions: int = 0
    #: photos dropped because their only file now holds other content (a new photo)
    replaced: int = 0
    #: photos already in the gallery whose metadata this call stored (format 2's)
    filled: int = 0
    photo_ids: list[int] = field(default_factory=list)


class IndexedFiles:
    """The indexed files of ``gallery``."""

    def __init__(self, gallery: Gallery) -> None:
        self.gallery = gallery

    def next_run(self) -> int:
        """A number for a new indexing run (larger than every run before)."""
        return records.next_run(self.gallery.records.reader())

    def file_state(self, path: str) -> FileState | None:
        """What the records hold of the file at ``path`` (``records.FileState``)."""
        return records.file_state(self.gallery.records.reader(), path)

    def photo_of_sha(self, sha256: str) -> int | None:
        """The id of the photo with this content, if the gallery holds it."""
        return records.photo_of_sha(self.gallery.records.reader(), sha256)

    def has_files_under(self, folder: Path) -> bool:
        """Whether any indexed file lies under ``folder``."""
        return records.has_files_under(self.gallery.records.reader(), str(folder))

    def add_files(self, files: Sequence[IndexedFile], run: int = 0) -> Added:
        """Record indexed files and their captions in one transaction (known content: another
        file of its photo; photos left with no file go), seen by ``run``."""
        added, dim = Added(), self.gallery.dim
        with self.gallery.records.transaction() as db:
            for item in files:
                photo_id = records.photo_of_sha(db, item.sha256)
                if photo_id is None:
                    if item.vector is None:
                        raise ValueError(f"{item.path}: a new photo needs its vector")
                    vector = as_matrix(item.vector, dim)[0]
                    photo_id = records.insert_photo(
                        db, item.sha256, item.path, vector, meta=item.meta
                    )
                    added.photos += 1
                elif item.meta is not None:
                    added.filled += records.fill_metadata(db, photo_id, item.meta)
                if item.classes is not None:  # new, or indexed before classes were kept
                    records.insert_classes(db, photo_id, *item.classes)
                before = records.record_file(db, item.path, photo_id, item.size, item.mtime_ns, run)
                if before is None:
                    added.files += 1
                elif before != photo_id:
                    added.replaced += records.drop_orphans(db, before)
                rows = caption_rows(item.captions, item.caption_vectors, dim)
                added.captions += len(records.insert_captions(db, photo_id, rows))
                added.photo_ids.append(photo_id)
        self.gallery.indexes.refresh()
        return added

    def mark_seen(
        self, paths: Sequence[str], run: int, metadata: Sequence[tuple[int, PhotoMetadata]] = ()
    ) -> int:
        """Mark unchanged files seen by ``run`` and store the ``metadata`` read for photos
        that had none, in one transaction; returns the photos filled."""
        with self.gallery.records.transaction() as db:
            records.mark_seen(db, paths, run)
            return sum(records.fill_metadata(db, pid, meta) for pid, meta in metadata)

    def forget_unseen(self, roots: Sequence[str], run: int) -> int:
        """Forget files under ``roots`` that ``run`` did not find; the photos removed."""
        with self.gallery.records.transaction() as db:
            for root in roots:
                records.forget_unseen(db, root, run)
            removed = records.drop_orphans(db)
        self.gallery.indexes.refresh()
        return removed

    def forget(self, paths: Sequence[str]) -> int:
        """Forget the files at or under ``paths`` in one transaction; the photos removed."""
        with self.gallery.records.transaction() as db:
            for path in paths:
                records.forget_files(db, path)
            removed = records.drop_orphans(db)
        self.gallery.indexes.refresh()
        return removed

    def files(self) -> dict[str, int]:
        """Every indexed file: its path → its photo's id."""
        return dict(records.indexed_files(self.gallery.records.reader()))
