"""The photo library by date (``GET /images``): the gallery's photos that pass a filter,
newest or oldest first, a page at a time — no text, no relevance.

A page is ``k`` photos of ``Gallery.images_by_date`` (the records' keyset over
``photos_taken``: ties in one second by id, the undated last), its cursor the last photo's
place in that order (``index.ranking.pages.Cursor``: group 0 dated / 1 undated, its time, its
id), so a photo added or removed between two pages shifts nothing already read, and
``total`` the number of photos that pass the filter (``Gallery.count_images``, exact).
"""

from __future__ import annotations

from dataclasses import dataclass

from groundsearch.index.gallery import DateKey, Gallery, ImageRecord
from groundsearch.index.ranking.pages import Cursor, fingerprint
from groundsearch.index.ranking.photo_pages import PageAsk

#: The orders of the listing: newest first (the default) or oldest first.
LIBRARY_ORDERS = ("-date", "date")


@dataclass(frozen=True)
class LibraryPage:
    """A page of the library: its photos, the next page's cursor (None at the end) and
    how many photos pass the filter."""

    photos: list[ImageRecord]
    next: str | None
    total: int


@dataclass(eq=False)
class Library:
    """``GET /images``: the gallery's photos by date."""

    gallery: Gallery

    def page(self, ask: PageAsk) -> LibraryPage:
        """The page ``ask`` wants (CursorError, a 422, for a cursor made for other
        filters or another order, or not made here at all)."""
        if ask.order not in LIBRARY_ORDERS:
            raise ValueError(f"order must be one of {LIBRARY_ORDERS}, got {ask.order!r}")
        query = fingerprint("library", ask.where)
        after, served = None, 0
        if ask.cursor is not None:
            cursor = Cursor.decode(ask.cursor, ask.order, query)
            after, served = DateKey(cursor.group == 0, cursor.key, cursor.id), cursor.served
        newest = ask.order == "-date"
        total = self.gallery.count_images(ask.where)  # also picks the plan
        photos = self.gallery.images_by_date(ask.k + 1, ask.where, newest, after, total)
        more, photos = len(photos) > ask.k, photos[: ask.k]
        nxt = None
        if more:
            last = self.gallery.date_key(photos[-1])
            group = 0 if last.dated else 1
            served += len(photos)
            nxt = Cursor(ask.order, group, last.taken_at, last.id, served, query).encode()
        return LibraryPage(photos, nxt, total)
