"""Text → the gallery photos that match it best; a photo (and a text) → the photos most
like it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from groundsearch.index.gallery import Gallery
from groundsearch.index.hits import Ranking
from groundsearch.index.ranking.pages import Page
from groundsearch.index.ranking.photo_pages import PageAsk, photo_page
from groundsearch.model.runtime.arithmetic import arithmetic_query
from groundsearch.model.runtime.fusion import ranked_relevance
from groundsearch.model.runtime.hubness import Penalties
from groundsearch.service.core.fusion import Fuser
from groundsearch.service.core.photo_vectors import PhotoVectors
from groundsearch.service.core.queries import QueryVectors
from groundsearch.service.core.relevance import NO_JUDGE, Judge
from groundsearch.service.core.timing import Stages, Timings


@dataclass(eq=False)
class Search:
    """``/search``: a cleaned query's vector (cached), then the gallery's nearest photos."""

    queries: QueryVectors
    gallery: Gallery
    stages: Stages
    judge: Judge = NO_JUDGE
    #: the hubness correction: hits re-ranked by score − the photo's penalty
    penalties: Penalties | None = None
    #: short queries' scores fused with their hits' evidence (None: joint scores alone)
    fuser: Fuser | None = None

    def clean(self, text: str) -> str:
        """The query as cleaned (once, at the route); UnusableText if it cannot be used."""
        return self.queries.clean(text)

    def is_cached(self, cleaned: str) -> bool:
        """Whether the query needs no parse (called on the event loop)."""
        return self.queries.is_cached(cleaned)

    def run(
        self, cleaned: str, ask: PageAsk, min_relevance: float | None = None
    ) -> tuple[Page, Timings, float | None]:
        """The page ``ask`` wants of the photos matching a cleaned query, and the threshold."""
        timings: Timings = {}
        vec, words, content = self.queries.vector_and_nouns(cleaned, timings)
        nouns = self.judge.named(words)
        threshold = self.judge.threshold(min_relevance, bool(nouns), cleaned)
        fuser = self.fuser if self.fuser and self.fuser.applies(content, nouns, words) else None

        def fetch(n: int) -> Ranking:
            ranking = self.gallery.rank_images(vec, n, ask.where)
            if self.penalties is not None and len(ranking):
                ranking = Ranking(*self.penalties.ranked(ranking.ids, ranking.scores))
            return ranking if fuser is None else fuser.rank(ranking, nouns, content, words)

        def judge(ranking: Ranking) -> np.ndarray | None:
            evidence = self.judge.evidence(nouns, ranking.ids)
            p = self.judge.relevance("text-image", ranking.judged, vec, cleaned, evidence)
            return p if p is None or fuser is None else ranked_relevance(p)

        with self.stages.stage("search", timings):
            page = photo_page(
                self.gallery, fetch, judge, ask, threshold, cleaned, monotone=not nouns
            )
        return page, timings, threshold


@dataclass(eq=False)
class PhotoSearch:
    """``/search/image``: the photos most like an uploaded one, optionally with a text."""

    photos: PhotoVectors
    queries: QueryVectors
    gallery: Gallery
    stages: Stages
    judge: Judge = NO_JUDGE
    channel_columns: int = 0

    def run(
        self,
        image: Image.Image,
        identity: str,
        cleaned: str | None,
        ask: PageAsk,
        threshold: float | None = None,
    ) -> tuple[Page, Timings]:
        """The page ``ask`` wants of the photos nearest the photo's vector, or with a text
        ``unit(photo + text)`` (judged as arithmetic); ``identity`` names it in the cursor."""
        timings: Timings = {}
        vec = self.photos.vector(image, timings)
        kind = "image-image"
        if cleaned is not None:
            text = self.queries.vector(cleaned, timings)
            vec, kind = arithmetic_query(vec, [text], [], self.channel_columns), "arithmetic"

        def fetch(n: int) -> Ranking:
            return self.gallery.rank_images(vec, n, ask.where)

        def judge(ranking: Ranking) -> np.ndarray | None:
            return self.judge.relevance(kind, ranking.scores)

        with self.stages.stage("search", timings):
            page = photo_page(self.gallery, fetch, judge, ask, threshold, (identity, cleaned))
        return page, timings
