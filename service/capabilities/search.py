"""Text → the gallery photos that match it best."""

from __future__ import annotations

from dataclasses import dataclass

from groundsearch.index.gallery import Gallery, ImageRecord
from groundsearch.service.queries import QueryVectors
from groundsearch.service.relevance import NO_JUDGE, Judge
from groundsearch.service.timing import Stages, Timings

#: Gallery photos with their scores, best first.
ImageHits = list[tuple[ImageRecord, float]]
#: Each hit's relevance (None without a relevance model), in the hits' order.
Relevances = list[float | None]


@dataclass(eq=False)
class Search:
    """``/search``: a cleaned query's vector (cached), then the gallery's nearest photos."""

    queries: QueryVectors
    gallery: Gallery
    stages: Stages
    judge: Judge = NO_JUDGE

    def clean(self, text: str) -> str:
        """The query as cleaned (once, at the route); UnusableText if it cannot be used."""
        return self.queries.clean(text)

    def is_cached(self, cleaned: str) -> bool:
        """Whether the query needs no parse (called on the event loop)."""
        return self.queries.is_cached(cleaned)

    def run(self, cleaned: str, k: int) -> tuple[ImageHits, Relevances, Timings]:
        """The ``k`` photos that best match a cleaned query, and their relevance (read
        from the query's top scores, ``service.relevance``)."""
        timings: Timings = {}
        vec = self.queries.vector(cleaned, timings)
        with self.stages.stage("search", timings):
            hits = self.gallery.search_images(vec, self.judge.fetch(k))
        relevance = self.judge.of("text-image", [s for _, s in hits], vec, cleaned)
        return hits[:k], relevance[:k], timings
