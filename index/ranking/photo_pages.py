"""A page of gallery photos for one query vector: filtered in the search, judged, ordered.

The capabilities that list photos (``/search``, ``/search/image``,
``/images/{id}/similar``) read their ranking as hits (``hits.Hit``: id, score) through
``Gallery.rank_images`` with the request's filters, judge each hit (``service.core.relevance``)
from the query's scores best first, and cut the page with ``index.ranking.pages``; only the
page's photos are read from the records (a total above the cutoff reads up to 1,000
scores, not 1,000 records), and a date order reads the ranking's dates alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.gallery import Gallery
from groundsearch.index.ranking.hits import Hit
from groundsearch.index.ranking.pages import ORDERS, Cursor, Page, fingerprint, paginate

#: n → the ranking's first n photos, best first.
RankFetch = Callable[[int], Sequence[Hit[None]]]
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

    def ranked(n: int) -> list[Hit[None]]:
        hits = list(fetch(n))
        if dated:
            when = gallery.taken_at([h.id for h in hits])
            for hit in hits:
                hit.taken_at = when.get(hit.id)
        return hits

    page = paginate(ranked, judge, ask.k, ask.order, threshold, cursor, key, monotone=monotone)
    found = gallery.image_records([h.id for h in page.hits])
    hits = [h for h in page.hits if h.id in found]  # removed since it was ranked: left out
    for hit in hits:
        hit.item = found[hit.id]
    return Page(hits, page.next, page.total, page.total_exact)
