"""Sentences for a photo (found among captions, and written by the decoder) and for a
text (``/paraphrase``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from PIL import Image

from groundsearch.index.gallery import Gallery, UnknownItemError
from groundsearch.model.runtime.captioning import Generated
from groundsearch.model.runtime.captioning.novel import Seen
from groundsearch.model.runtime.hubness import Penalties
from groundsearch.model.runtime.images.photos import PhotoError, decode_photo
from groundsearch.service.core.bank_loader import BankLoader
from groundsearch.service.core.photo_vectors import PhotoVectors
from groundsearch.service.core.queries import QueryVectors
from groundsearch.service.core.relevance import NO_JUDGE, Judge
from groundsearch.service.core.timing import Stages, Timings
from groundsearch.service.core.writing import Captioner


@dataclass(frozen=True)
class Description:
    """A caption that describes a photo: from the gallery (with its photo) or the bank."""

    text: str
    score: float
    source: str
    id: int | None = None
    image_id: int | None = None
    #: the probability that it describes the photo (None without a relevance model)
    relevance: float | None = None


#: What ``Describe.run`` finds: captions, written sentences, what the classifier saw.
Described = tuple[list[Description], list[Generated], list[Seen], Timings]


@dataclass(eq=False)
class Describe:
    """``/describe``, ``/images/{id}/describe`` and ``/paraphrase``."""

    photos: PhotoVectors
    queries: QueryVectors
    gallery: Gallery
    bank: BankLoader
    captioner: Captioner
    stages: Stages
    judge: Judge = NO_JUDGE
    #: the hubness correction of the gallery's captions (the bank corrects its own)
    penalties: Penalties | None = None

    @property
    def writes(self) -> bool:
        """Whether the server has a caption decoder."""
        return self.captioner.decoder is not None

    def run(
        self,
        image: Image.Image,
        k: int,
        retrieved: bool = True,
        written: bool = False,
        beam: int | None = None,
    ) -> Described:
        """The ``k`` best captions of the gallery's and the bank's if ``retrieved``, the
        decoder's sentences if ``written``, and what the classifier saw."""
        timings: Timings = {}
        features, vec = self.photos.features_and_vector(image, timings)
        sentences = self.captioner.write(vec, timings, beam, features) if written else []
        concepts = self.captioner.concepts(features)
        if not retrieved:
            return [], sentences, concepts, timings
        with self.stages.stage("search", timings):
            found, pool = self._found(vec, k)
        found.sort(key=lambda d: (-d.score, d.source != "gallery"))
        found = self._judged(found, pool)
        unique: dict[str, Description] = {}
        for d in found:
            unique.setdefault(d.text, d)
        return list(unique.values())[:k], sentences, concepts, timings

    def gallery_photo(self, image_id: int, max_pixels: int) -> Image.Image:
        """A gallery photo decoded as an upload is (UnknownItemError if unreadable)."""
        path = self.gallery.photo_path(image_id)
        try:
            image, _ = decode_photo(path, max_pixels, min_side=self.photos.min_side)
        except PhotoError as exc:
            raise UnknownItemError(
                f"the photo of image {image_id} can no longer be read ({exc})"
            ) from None
        return image

    def _found(self, vec: np.ndarray, k: int) -> tuple[list[Description], list[Description]]:
        """The first ``k`` captions of each source, and all those fetched (``Judge.fetch``)."""
        fetch = self.judge.fetch(k)
        hits = self.gallery.search_captions(vec, fetch)
        scores = [h.score for h in hits]
        if self.penalties is not None and hits:  # score − the caption's penalty
            scores = self.penalties.corrected(np.array([h.id for h in hits]), scores).tolist()
        gallery = [
            Description(h.record.text, float(s), "gallery", h.id, h.record.image_id)
            for h, s in zip(hits, scores, strict=True)
        ]
        gallery.sort(key=lambda d: -d.score)
        bank = self.bank.bank
        from_bank = bank.search(vec, fetch) if bank is not None else []
        banked = [Description(t, score, "bank") for t, score in from_bank]
        return gallery[:k] + banked[:k], gallery + banked

    def _judged(self, found: list[Description], pool: list[Description]) -> list[Description]:
        """``found`` with each caption's relevance, read from the pool's scores."""
        pool = sorted(pool, key=lambda d: (-d.score, d.source != "gallery"))
        judged = self.judge.of("image-caption", [d.score for d in pool])
        relevance = {(d.source, d.id, d.text): p for d, p in zip(pool, judged, strict=True)}
        return [replace(d, relevance=relevance.get((d.source, d.id, d.text))) for d in found]

    def clean(self, text: str) -> str:
        """The text as cleaned (once, at the route); UnusableText if it cannot be used."""
        return self.queries.clean(text)

    def paraphrase(self, cleaned: str, beam: int | None = None) -> tuple[list[Generated], Timings]:
        """Sentences the decoder writes for the vector of a cleaned text."""
        timings: Timings = {}
        self.captioner.require()  # before the parse: refuse at once
        vec = self.queries.vector(cleaned, timings)
        return self.captioner.write(vec, timings, beam), timings
