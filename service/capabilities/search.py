"""Text → the gallery photos that match it best."""

from __future__ import annotations

from dataclasses import dataclass

from groundsearch.index.gallery import Gallery, ImageRecord
from groundsearch.service.queries import QueryVectors
from groundsearch.service.timing import Stages, Timings

#: Gallery photos with their scores, best first.
ImageHits = list[tuple[ImageRecord, float]]


@dataclass(eq=False)
class Search:
    """``/search``: a cleaned query's vector (cached), then the gallery's nearest photos."""

    queries: QueryVectors
    gallery: Gallery
    stages: Stages

    def clean(self, text: str) -> str:
        """The query as cleaned (once, at the route); UnusableText if it cannot be used."""
        return self.queries.clean(text)

    def is_cached(self, cleaned: str) -> bool:
        """Whether the query needs no parse (called on the event loop)."""
        return self.queries.is_cached(cleaned)

    def run(self, cleaned: str, k: int) -> tuple[ImageHits, Timings]:
        """The ``k`` photos that best match a cleaned query."""
        timings: Timings = {}
        vec = self.queries.vector(cleaned, timings)
        with self.stages.stage("search", timings):
            hits = self.gallery.search_images(vec, k)
        return hits, timings
