"""Gallery photos by id: the file itself (upright) and its nearest neighbours."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from groundsearch.index.gallery import Gallery, UnknownItemError
from groundsearch.model.runtime.images.photos import upright_copy
from groundsearch.service.capabilities.search import ImageHits, Relevances
from groundsearch.service.relevance import NO_JUDGE, Judge


@dataclass(frozen=True)
class ServedPhoto:
    """What ``/images/{id}`` sends: the file, or the photo turned upright.

    ``upright`` is the photo re-encoded upright in ``format`` when its EXIF orientation is
    not 1; None when the file itself is sent (upright already, animated, or not readable
    here: it is then sent as it is stored). ``stat``: the file's, read before it.
    """

    path: Path
    stat: os.stat_result
    upright: bytes | None = None
    format: str | None = None


@dataclass(eq=False)
class Photos:
    """``/images/{id}`` and ``/images/{id}/similar`` (UnknownItemError: 404)."""

    gallery: Gallery
    judge: Judge = NO_JUDGE

    def path(self, image_id: int) -> Path:
        """The file of a gallery photo (UnknownItemError if the item or file is gone)."""
        return self.gallery.photo_path(image_id)

    def served(self, image_id: int) -> ServedPhoto:
        """The gallery photo as ``/images/{id}`` sends it: upright (UnknownItemError if the
        item or file is gone)."""
        path = self.path(image_id)
        gone = UnknownItemError(f"the photo of image {image_id} is no longer on disk")
        try:
            stat = path.stat()
        except FileNotFoundError:  # removed since photo_path found it
            raise gone from None
        try:
            turned = upright_copy(path)
        except FileNotFoundError:
            raise gone from None
        except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError):
            turned = None  # a file Pillow cannot turn: sent as it is stored
        return ServedPhoto(path, stat) if turned is None else ServedPhoto(path, stat, *turned)

    def similar(self, image_id: int, k: int) -> tuple[ImageHits, Relevances]:
        """The ``k`` gallery photos closest to this one (itself excluded), and their
        relevance."""
        hits = self.gallery.similar_images(image_id, self.judge.fetch(k))
        relevance = self.judge.of("image-image", [s for _, s in hits])
        return hits[:k], relevance[:k]
