"""A page of gallery photos for one query vector: filtered in the search, judged as
arrays, ordered (``pages``); only the page's photos are read from the records."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from groundsearch.index.filters.conditions import PhotoFilter, floats
from groundsearch.index.gallery import Gallery
from groundsearch.index.hits import Ranking
from groundsearch.index.ranking.pages import (
    ORDERS,
    Cursor,
    Fetch,
    Judge,
    Page,
    fingerprint,
    paginate,
)


@dataclass(frozen=True)
class PageAsk:
    """What a request asks of its list: how many, which photos, in what order, from where."""

    k: int
    where: PhotoFilter = field(default_factory=PhotoFilter)
    order: str = ORDERS[0]
    cursor: str | None = None


def photo_page(
    gallery: Gallery,
    fetch: Fetch,
    judge: Judge,
    ask: PageAsk,
    threshold: float | None,
    query: object,
    monotone: bool = True,
) -> Page:
    """The page ``ask`` wants of a ranking, with the photos' records (``query`` is in the
    cursor: CursorError for another query's)."""
    key = fingerprint(query, ask.where, threshold)
    cursor = None if ask.cursor is None else Cursor.decode(ask.cursor, ask.order, key)
    dated = ask.order != "relevance"

    def ranked(n: int) -> Ranking:
        ranking = fetch(n)
        if not dated:
            return ranking
        when = gallery.taken_at(ranking.ids.tolist())
        taken = [when.get(i) for i in ranking.ids.tolist()]
        return replace(ranking, taken_at=floats(taken))

    page = paginate(ranked, judge, ask.k, ask.order, threshold, cursor, key, monotone=monotone)
    found = gallery.image_records([h.id for h in page.hits])
    hits = [h for h in page.hits if h.id in found]  # removed since it was ranked: left out
    for hit in hits:
        hit.item = found[hit.id]
    return Page(hits, page.next, page.total, page.total_exact)
