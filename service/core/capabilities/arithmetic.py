"""Embedding arithmetic (Kiros et al. 2014): photos near ``photo − Σ minus + Σ plus``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PIL import Image

from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.gallery import Gallery, ImageRecord
from groundsearch.index.hits import Hit
from groundsearch.model.runtime.arithmetic import arithmetic_query, centre_rerank
from groundsearch.model.runtime.captioning import Generated
from groundsearch.model.runtime.embedder import Embedder
from groundsearch.service.core.photo_vectors import PhotoVectors
from groundsearch.service.core.queries import QueryVectors
from groundsearch.service.core.relevance import NO_JUDGE, Judge
from groundsearch.service.core.timing import Stages, Timings
from groundsearch.service.core.writing import Captioner


@dataclass(eq=False)
class Arithmetic:
    """``/arithmetic`` (from a gallery photo) and ``/arithmetic/upload`` (from a photo)."""

    model: Embedder
    photos: PhotoVectors
    queries: QueryVectors
    gallery: Gallery
    captioner: Captioner
    stages: Stages
    judge: Judge = NO_JUDGE

    def run(
        self,
        base: int | Image.Image,
        plus: Sequence[str],
        minus: Sequence[str],
        k: int,
        rerank: bool,
        rerank_top: int = 5,
        written: bool = False,
        where: PhotoFilter | None = None,
    ) -> tuple[list[Hit[ImageRecord]], list[Generated], Timings]:
        """Images near ``base − Σ minus + Σ plus`` passing ``where``, with their relevance;
        ``rerank``: re-sorted by its top's mean; ``written``: also the decoder's sentences."""
        timings: Timings = {}
        if isinstance(base, int):
            start = self.gallery.image_vector(base)
        else:
            start = self.photos.vector(base, timings)
        added = [self._phrase(p, f"plus phrase {i + 1}", timings) for i, p in enumerate(plus)]
        taken = [self._phrase(p, f"minus phrase {i + 1}", timings) for i, p in enumerate(minus)]
        query = arithmetic_query(start, added, taken, getattr(self.model, "channel_columns", 0))
        exclude = {base} if isinstance(base, int) else set()
        fetch = k + len(exclude) + (max(4 * k, 50) if rerank else 0)
        with self.stages.stage("search", timings):
            ranking = self.gallery.rank_images(
                query, max(fetch, self.judge.fetch(k) + len(exclude)), where
            )
            records = self.gallery.image_records(ranking.ids.tolist())
        found = [Hit(i, s, records[i]) for i, s in ranking.pairs() if i in records]
        ranked = [h for h in found if h.id not in exclude]
        judged = self.judge.of("arithmetic", [h.score for h in ranked])
        for hit, relevance in zip(ranked, judged, strict=True):
            hit.relevance = relevance  # from the query's own scores, before any rerank
        hits = [h for h in found[:fetch] if h.id not in exclude]
        sentences = self.captioner.write(query, timings) if written else []
        if rerank and hits:
            with self.stages.stage("rerank", timings):
                vectors = np.stack([self.gallery.image_vector(h.id) for h in hits])
                order, scores = centre_rerank(vectors, rerank_top)
                hits = [
                    Hit(hits[i].id, float(s), hits[i].item, relevance=hits[i].relevance)
                    for i, s in zip(order, scores, strict=True)
                ]
        return hits[:k], sentences, timings

    def _phrase(self, text: str, what: str, timings: Timings) -> np.ndarray:
        """A phrase's vector, cleaned here (once), in the order the phrases are read."""
        return self.queries.vector(self.queries.clean(text, what), timings, what)
