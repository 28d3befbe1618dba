"""Gallery photos by id: the file itself and its nearest neighbours."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from groundsearch.index.gallery import Gallery
from groundsearch.service.capabilities.search import ImageHits, Relevances
from groundsearch.service.relevance import NO_JUDGE, Judge


@dataclass(eq=False)
class Photos:
    """``/images/{id}`` and ``/images/{id}/similar`` (UnknownItemError: 404)."""

    gallery: Gallery
    judge: Judge = NO_JUDGE

    def path(self, image_id: int) -> Path:
        """The file of a gallery photo (UnknownItemError if the item or file is gone)."""
        return self.gallery.photo_path(image_id)

    def similar(self, image_id: int, k: int) -> tuple[ImageHits, Relevances]:
        """The ``k`` gallery photos closest to this one (itself excluded), and their
        relevance."""
        hits = self.gallery.similar_images(image_id, self.judge.fetch(k))
        relevance = self.judge.of("image-image", [s for _, s in hits])
        return hits[:k], relevance[:k]
