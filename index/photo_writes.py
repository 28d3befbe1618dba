"""A gallery's writes: uploaded photos in, photos out, each in one transaction (an upload's
file synced before it, deleted after its removal's)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from groundsearch.index.errors import UnknownItemError
from groundsearch.index.search.search_indexes import SearchIndexes
from groundsearch.index.store import records
from groundsearch.index.store.photo_metadata import PhotoMetadata, read_upload_metadata
from groundsearch.index.store.records import as_matrix, caption_rows
from groundsearch.index.store.upload_files import UploadFiles

__all__ = ["PhotoWrites"]


class PhotoWrites:
    """The gallery's writes: each durable when it returns and searchable here at once."""

    def __init__(self, folder: Path, indexes: SearchIndexes) -> None:
        self.folder, self.indexes, self.records = Path(folder), indexes, indexes.records
        self.dim = indexes.dim
        #: the uploaded photos' files (``uploads/``)
        self.uploads = UploadFiles(self.folder)

    def add_photo(
        self,
        data: bytes,
        extension: str,
        vector: np.ndarray,
        captions: Sequence[str] = (),
        caption_vectors: np.ndarray | None = None,
        meta: PhotoMetadata | None = None,
        classes: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[int, list[int], bool]:
        """Keep an uploaded photo in ``uploads/`` and add it with its captions in one
        transaction (the same bytes again add only new captions); (image id, new caption
        ids, whether it was new)."""
        sha = hashlib.sha256(data).hexdigest()
        file = self.uploads.name_for(sha, extension)
        vec = as_matrix(vector, self.dim, "vector")[0]
        rows = caption_rows(captions, caption_vectors, self.dim)
        meta = read_upload_metadata(data, None) if meta is None else meta
        with self.uploads.locked(), self.records.transaction() as db:
            found = records.photo_of_sha(db, sha)
            if found is None:
                self.uploads.write(file, data)  # the file before its record
                image_id = records.insert_photo(db, sha, file, vec, uploaded=True, meta=meta)
                if classes is not None:
                    records.insert_classes(db, image_id, *classes)
                new = True
            else:
                image_id, new = found, False
                records.fill_metadata(db, image_id, meta)
            caption_ids = records.insert_captions(db, image_id, rows)
        self.indexes.refresh()
        return image_id, caption_ids, new

    def fill_upload_metadata(self) -> int:
        """Read and store the metadata of uploaded photos that have none (format 2), each
        in its own transaction; how many were filled."""
        filled = 0
        for image_id, path in records.uploads_not_read(self.records.reader()):
            try:
                data = (self.folder / path).read_bytes()
            except OSError:
                continue  # its file is gone: the photo is served by nobody anyway
            with self.records.transaction() as db:
                filled += records.fill_metadata(db, image_id, read_upload_metadata(data, None))
        return filled

    def remove_photo(self, image_id: int) -> int:
        """Remove a photo, its captions and its uploaded file; how many captions went."""
        with self.records.transaction() as db:
            removed = records.delete_photo(db, image_id)
            if removed is None:
                raise UnknownItemError(f"no image with id {image_id} in the gallery")
        path, uploaded, count = removed
        if uploaded:  # unless the same bytes were uploaded again since the commit
            with self.uploads.locked(exclusive=True):
                if not records.holds_upload(self.records.reader(), path):
                    self.uploads.delete(path)
        self.indexes.refresh()
        return count

    def clear_leftovers(self) -> None:
        """Delete uploaded files no photo names (what interrupted uploads left)."""
        self.uploads.clear(lambda: records.uploaded_paths(self.records.reader()))
