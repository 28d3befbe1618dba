"""The photo library by date (``GET /images``): the photos that pass a filter, newest or
oldest first, a keyset page at a time (writes between pages shift nothing already read).
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
    """A page of the library: its photos, the next cursor and the total."""

    photos: list[ImageRecord]
    next: str | None
    total: int


@dataclass(eq=False)
class Library:
    """``GET /images``: the gallery's photos by date."""

    gallery: Gallery

    def page(self, ask: PageAsk) -> LibraryPage:
        """The page ``ask`` wants (CursorError for a cursor not made for it)."""
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
