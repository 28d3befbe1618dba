"""A page of gallery photos for one query vector: filtered in the search, judged, ordered.

The capabilities that list photos (``/search``, ``/search/image``,
``/images/{id}/similar``) read their ranking through ``Gallery.search_images`` with the
request's filters, judge each hit (``service.relevance``) from the query's scores best
first, and cut the page with ``service.pages``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from groundsearch.index.filters import PhotoFilter
from groundsearch.index.gallery import ImageRecord
from groundsearch.service.pages import ORDERS, Cursor, Page, fingerprint, paginate

#: n → the ranking's first n photos with their scores, best first.
PhotoFetch = Callable[[int], Sequence[tuple[ImageRecord, float]]]
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
    fetch: PhotoFetch, judge: ScoreJudge, ask: PageAsk, threshold: float | None, query: object
) -> Page:
    """The page ``ask`` wants of a ranking; ``query`` identifies it in the cursor (its text
    or photo), with the filters and threshold (CursorError for another query's cursor)."""
    key = fingerprint(query, ask.where, threshold)
    cursor = None if ask.cursor is None else Cursor.decode(ask.cursor, ask.order, key)

    def ranked(n: int) -> list[tuple[object, int, float, float | None]]:
        return [(r, r.id, s, r.meta.taken_at) for r, s in fetch(n)]

    return paginate(ranked, judge, ask.k, ask.order, threshold, cursor, key)


def hits_of(page: Page) -> tuple[list[tuple[ImageRecord, float]], list[float | None]]:
    """The page's photos with their scores, and their relevance, in the page's order."""
    hits: list[tuple[ImageRecord, float]] = []
    for h in page.hits:
        assert isinstance(h.item, ImageRecord)
        hits.append((h.item, h.score))
    return hits, [h.relevance for h in page.hits]
