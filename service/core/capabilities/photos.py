"""Gallery photos by id: the file itself (upright), a thumbnail, its nearest neighbours."""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from groundsearch.index.gallery import Gallery, UnknownItemError
from groundsearch.index.hits import Ranking
from groundsearch.index.ranking.pages import Page
from groundsearch.index.ranking.photo_pages import PageAsk, photo_page
from groundsearch.model.runtime.images.photos import (
    PHOTO_FORMATS,
    PhotoError,
    jpeg_copy,
    upright_copy,
)
from groundsearch.service.core.relevance import NO_JUDGE, Judge
from groundsearch.service.core.thumbnails import Thumbnail, Thumbnails, thumbnail_etag

#: The suffixes of HEIF files: sent as JPEGs to clients that do not take HEIF.
HEIF_SUFFIXES = frozenset(f".{suffix}" for suffix in PHOTO_FORMATS["HEIF"].suffixes)


@dataclass(frozen=True)
class ServedPhoto:
    """What ``/images/{id}`` sends: the file (``upright`` None) or the photo re-encoded
    upright in ``format``; ``negotiated``: ``Vary: Accept``."""

    path: Path
    stat: os.stat_result
    upright: bytes | None = None
    format: str | None = None
    negotiated: bool = False


@dataclass(eq=False)
class Photos:
    """``/images/{id}``, its thumbnail and ``/images/{id}/similar``."""

    gallery: Gallery
    judge: Judge = NO_JUDGE
    thumbnails: Thumbnails = field(default_factory=Thumbnails)

    def path(self, image_id: int) -> Path:
        """The file of a gallery photo (UnknownItemError if the item or file is gone)."""
        return self.gallery.photo_path(image_id)

    def served(self, image_id: int, takes_heif: bool = True) -> ServedPhoto:
        """The photo as ``/images/{id}`` sends it: upright, a HEIF as a JPEG unless the
        client ``takes_heif``."""
        path = self.path(image_id)
        gone = UnknownItemError(f"the photo of image {image_id} is no longer on disk")
        try:
            stat = path.stat()
        except FileNotFoundError:  # removed since photo_path found it
            raise gone from None
        heif = path.suffix.lower() in HEIF_SUFFIXES
        try:
            if heif and not takes_heif:
                return ServedPhoto(path, stat, jpeg_copy(path), "JPEG", negotiated=True)
            turned = upright_copy(path)
        except FileNotFoundError:
            raise gone from None
        except (
            OSError,
            SyntaxError,
            ValueError,
            EOFError,
            RuntimeError,
            Image.DecompressionBombError,
        ):
            turned = None  # a file Pillow cannot turn: sent as it is stored
        if turned is None:
            return ServedPhoto(path, stat, negotiated=heif)
        return ServedPhoto(path, stat, *turned, negotiated=heif)

    def thumbnail(
        self, image_id: int, size: int, known: Collection[str] = ()
    ) -> tuple[Thumbnail, bool]:
        """The photo as an upright JPEG of at most ``size`` pixels, and whether it is new to
        a client holding the ETags ``known`` (False: empty ``data``, a 304)."""
        record = self.gallery.image(image_id)
        path = self.path(image_id)
        try:
            stat = path.stat()
        except FileNotFoundError:  # removed since photo_path found it
            raise UnknownItemError(f"the photo of image {image_id} is no longer on disk") from None
        etag = thumbnail_etag(record.sha256, stat, size)
        if etag in known or "*" in known:
            return Thumbnail(b"", etag, stat.st_mtime), False
        try:
            return self.thumbnails.get(path, stat, size, etag), True
        except PhotoError as exc:
            raise UnknownItemError(
                f"the photo of image {image_id} can no longer be read ({exc})"
            ) from None

    def similar(self, image_id: int, ask: PageAsk, threshold: float | None = None) -> Page:
        """The page ``ask`` wants of the photos closest to this one, with their relevance."""
        self.gallery.image_vector(image_id)  # UnknownItemError before anything else

        def fetch(n: int) -> Ranking:
            return self.gallery.rank_similar(image_id, n, ask.where)

        def judge(ranking: Ranking) -> np.ndarray | None:
            return self.judge.relevance("image-image", ranking.scores)

        return photo_page(self.gallery, fetch, judge, ask, threshold, ("similar", image_id))
