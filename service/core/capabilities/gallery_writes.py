"""Gallery writes: an uploaded photo (with its captions) in, a photo out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image

from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.objects import store_objects
from groundsearch.index.store.photo_metadata import read_upload_metadata
from groundsearch.model.runtime.images.photos import EXTENSIONS
from groundsearch.model.runtime.objects.detector import ObjectDetector
from groundsearch.model.runtime.sentences import labels
from groundsearch.service.core.photo_vectors import PhotoVectors
from groundsearch.service.core.queries import QueryVectors
from groundsearch.service.core.timing import Timings


@dataclass(eq=False)
class GalleryWrites:
    """``POST /gallery/images`` and ``DELETE /gallery/images/{id}``."""

    photos: PhotoVectors
    queries: QueryVectors
    gallery: Gallery
    #: a new photo's object scores are stored with it (None: without)
    detector: ObjectDetector | None = None

    def add(
        self,
        data: bytes,
        fmt: str,
        image: Image.Image,
        captions: Sequence[str],
        name: str | None = None,
    ) -> tuple[int, list[int], bool]:
        """Embed an uploaded photo and its captions (all checked first) and add them:
        (image id, caption ids, whether it was new)."""
        timings: Timings = {}
        whats = labels(len(captions))
        cleaned = [self.queries.clean(c, w) for c, w in zip(captions, whats, strict=True)]
        trees = self.queries.trees(cleaned, whats, timings) if captions else []
        features, image_vec = self.photos.features_and_vector(image, timings)
        caption_vecs = self.queries.door.embed(trees) if trees else None
        meta = read_upload_metadata(data, name)  # the headers only: no second decode
        added = self.gallery.writes.add_photo(
            data,
            EXTENSIONS[fmt],
            image_vec,
            [t.text for t in trees],
            caption_vecs,
            meta,
            self.photos.classes(features),
        )
        if added[2] and self.detector is not None:
            store_objects(self.gallery, {added[0]: self.detector.scores([image])[0]})
        return added

    def remove(self, image_id: int) -> int:
        """Remove a photo and its captions from the gallery; returns the captions removed."""
        return self.gallery.writes.remove_photo(image_id)
