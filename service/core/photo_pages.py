"""A page of gallery photos for one query vector: filtered in the search, judged, ordered.

The capabilities that list photos (``/search``, ``/search/image``,
``/images/{id}/similar``) read their ranking as (id, score) pairs through
``Gallery.rank_images`` with the request's filters, judge each hit (``service.core.relevance``)
from the query's scores best first, and cut the page with ``service.core.pages``; only the
page's photos are read from the records (a total above the cutoff reads up to 1,000
scores, not 1,000 records), and a date order reads the ranking's dates alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.gallery import Gallery, ImageRecord
from groundsearch.service.core.pages import ORDERS, Cursor, Page, Ranked, fingerprint, paginate

#: n → the ranking's first n photos as (id, score), best first.
RankFetch = Callable[[int], Sequence[tuple[int, float]]]
#: scores best first → each hit's relevance.
ScoreJudge = Callable[[Sequence[float]], Sequence[float | None]]


@dataclass(frozen=True)
class PageAsk:
    """What a request asks of its list: how many, which photos, in what order, from where."""

    k: int
    where: PhotoFilter = field(default_factory=PhotoFilter)
    order: str = ORDERS[0]
    cursor: str | None = None


def photo_page(
    gallery: Gallery,
    fetch: RankFetch,
    judge: ScoreJudge,
    ask: PageAsk,
    threshold: float | None,
    query: object,
    monotone: bool = True,
) -> Page:
    """The page ``ask`` wants of a ranking, its hits' items the photos' records; ``query``
    identifies it in the cursor (its text or photo), with the filters and threshold
    (CursorError for another query's cursor)."""
    key = fingerprint(query, ask.where, threshold)
    cursor = None if ask.cursor is None else Cursor.decode(ask.cursor, ask.order, key)
    dated = ask.order != "relevance"

    def ranked(n: int) -> list[tuple[object, int, float, float | None]]:
        hits = list(fetch(n))
        when = gallery.taken_at([i for i, _ in hits]) if dated else {}
        return [(None, i, s, when.get(i)) for i, s in hits]

    page = paginate(ranked, judge, ask.k, ask.order, threshold, cursor, key, monotone=monotone)
    found = gallery.image_records([h.id for h in page.hits])
    hits = [
        Ranked(found[h.id], h.id, h.score, h.taken_at, h.relevance)
        for h in page.hits
        if h.id in found  # removed since it was ranked
    ]
    return Page(hits, page.next, page.total, page.total_exact)


def hits_of(page: Page) -> tuple[list[tuple[ImageRecord, float]], list[float | None]]:
    """The page's photos with their scores, and their relevance, in the page's order."""
    hits: list[tuple[ImageRecord, float]] = []
    for h in page.hits:
        assert isinstance(h.item, ImageRecord)
        hits.append((h.item, h.score))
    return hits, [h.relevance for h in page.hits]
