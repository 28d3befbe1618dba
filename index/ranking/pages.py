"""Pages of a ranked answer: its order, a cursor, and the total above the relevance cutoff.

A query's answer is its *ranking*: the gallery photos that pass its filters, best score
first (the filters are applied inside the search: ``index.filters.conditions``). A page is up to
``k`` hits of it, in one of three orders:

- ``relevance`` (the default): the ranking's good matches (relevance at or above
  ``min_relevance``, among its first ``WINDOW`` hits) by score, then the rest by score,
  ``k`` hits a page, each page split into ``results`` and ``weak`` as a single answer is.
  While relevance falls with the score (a query judged without per-hit evidence) that is
  the ranking itself; with evidence a lower-scored photo can be the good match, and it
  comes before the guesses that outscore it;
- ``date`` / ``-date``: only the hits at or above ``min_relevance`` (a date-sorted list
  holds good matches only), oldest or newest first by when each photo was taken; photos
  without a date come last, ties by id. A date order reads at most ``WINDOW`` hits of the
  ranking.

**The cursor** is opaque (base64url JSON): the sort key of the last hit served and its id
(*keyset* paging, not an offset), the order, how many hits came before it, and a
fingerprint of the query and its filters (a cursor given to another query is refused).
The next page holds the hits that sort after that key. What a client sees when photos
are added or removed between two pages: a new photo that sorts before the cursor is not
shown (it belongs to a page already read), one that sorts after it appears in its place,
a removed one is skipped; a photo present at both requests is never shown twice and never
skipped. (The scores of the photos already there do not change: the model does not.)

**total** counts the hits at or above ``min_relevance`` that pass the filters, read from
the ranking up to ``WINDOW`` hits: ``total_exact`` is false when the window ends above the
cutoff (a query that many photos match), and ``total`` is then a lower bound. Without a
relevance model every hit counts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from groundsearch.index.ranking.hits import Hit

#: The most hits of a ranking a page or a total reads.
WINDOW = 1000
#: The orders a route accepts.
ORDERS = ("relevance", "date", "-date")
Order = Literal["relevance", "date", "-date"]


class CursorError(ValueError):
    """A cursor that cannot be used: malformed, or made for another query or order."""


@dataclass(frozen=True)
class Cursor:
    """Where a page ended: the last hit's sort key and id, and how many came before."""

    order: str
    group: int
    key: float
    id: int
    served: int
    query: str

    def encode(self) -> str:
        body = {
            "o": self.order,
            "g": self.group,
            "k": self.key,
            "i": self.id,
            "n": self.served,
            "q": self.query,
        }
        raw = json.dumps(body, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str, order: str, query: str) -> Cursor:
        """The cursor in ``text``; CursorError if malformed or not this query's."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            body = json.loads(raw)
            cursor = cls(
                str(body["o"]),
                int(body["g"]),
                float(body["k"]),
                int(body["i"]),
                int(body["n"]),
                body["q"],
            )
        except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
            raise CursorError(
                "the cursor is malformed: pass the 'next' of a previous page"
            ) from None
        if (
            not math.isfinite(cursor.key)
            or cursor.group not in (0, 1)
            or cursor.served < 0
            or not isinstance(cursor.query, str)
        ):
            raise CursorError("the cursor is malformed: pass the 'next' of a previous page")
        if cursor.order != order:
            raise CursorError(f"the cursor was made for order={cursor.order}, not order={order}")
        if cursor.query != query:
            raise CursorError("the cursor was made for another query or other filters")
        return cursor


def fingerprint(*parts: object) -> str:
    """A short digest of what makes a query (its text or photo, filters, threshold)."""
    digest = hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()
    return digest[:16]


@dataclass(frozen=True)
class Page:
    """One page: its hits in order, the next cursor (None at the end) and the total."""

    hits: list[Hit[Any]]
    next: str | None
    total: int
    total_exact: bool


#: (n) → up to n hits of the ranking, best first (with ``taken_at`` for a date order).
Fetch = Callable[[int], Sequence[Hit[Any]]]
#: scores best first → each hit's relevance (None without a model).
Judge = Callable[[Sequence[float]], Sequence[float | None]]


#: A hit's place in an order: (group, key, id), ascending.
SortKey = tuple[int, float, int]


def _sort_key(order: str, hit: Hit[Any], good: bool = True) -> SortKey:
    """(group, key, id): ascending in the order's direction; in relevance order the good
    matches (``good``) first, in date order the undated photos last."""
    if order == "relevance":
        return (0 if good else 1, -hit.score, hit.id)
    if hit.taken_at is None:
        return (1, 0.0, hit.id)
    return (0, hit.taken_at if order == "date" else -hit.taken_at, hit.id)


def _after(key: SortKey, cursor: Cursor) -> bool:
    return key > (cursor.group, cursor.key, cursor.id)


def _above(hit: Hit[Any], threshold: float | None) -> bool:
    return threshold is None or hit.relevance is None or hit.relevance >= threshold


def paginate(
    fetch: Fetch,
    judge: Judge,
    k: int,
    order: str = "relevance",
    threshold: float | None = None,
    cursor: Cursor | None = None,
    query: str = "",
    window: int = WINDOW,
    monotone: bool = True,
) -> Page:
    """The page of ``k`` hits after ``cursor`` (the first without one) of a ranking read
    through ``fetch``, in ``order``; its next cursor and the total above ``threshold``.

    One search and one judgement: the ranking's first ``window`` hits (more for a page
    past them) are fetched and judged at once, which is what the total needs anyway, and
    the page is cut from them. ``monotone``: relevance never rises down the ranking, so a
    window whose last hit is below the threshold holds every good match (with per-hit
    evidence it may rise: the total is then exact only for a ranking the window holds
    whole). A relevance-order page never serves a guess before a good match of the
    window."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    n = max(window, 2 * k + (cursor.served if cursor else 0))
    while True:
        hits = list(fetch(n))
        for hit, r in zip(hits, judge([h.score for h in hits]), strict=True):
            hit.relevance = r
        ended = len(hits) < n  # the whole ranking is read
        below = monotone and bool(hits) and not _above(hits[-1], threshold)  # past the cutoff
        # the good matches: at or above the threshold among the window's hits
        flags = [rank < window and _above(h, threshold) for rank, h in enumerate(hits)]
        good = [h for h, ok in zip(hits, flags, strict=True) if ok]
        if order == "relevance":
            # sure of the order above the last score fetched (a tie may go on past it)
            last = hits[-1].score if hits else math.inf
            sure = [
                (_sort_key(order, h, ok), h)
                for h, ok in zip(hits, flags, strict=True)
                if ended or ok or h.score > last
            ]
        else:
            sure = [(_sort_key(order, h), h) for h in good]  # a date order lists good ones
        pool = sorted(
            (kh for kh in sure if cursor is None or _after(kh[0], cursor)), key=lambda kh: kh[0]
        )
        if order == "relevance" and len(pool) <= k and not ended:
            n *= 2  # ties at the last score fetched hid the rest of the page
            continue
        return _page(order, pool, k, len(good), ended or below, cursor, query)


def _page(
    order: str,
    pool: list[tuple[SortKey, Hit[Any]]],
    k: int,
    good: int,
    exact: bool,
    cursor: Cursor | None,
    query: str,
) -> Page:
    hits = pool[:k]
    served = (cursor.served if cursor else 0) + len(hits)
    nxt = None
    if len(pool) > k and hits:
        group, key, ident = hits[-1][0]
        nxt = Cursor(order, group, key, ident, served, query).encode()
    return Page([h for _, h in hits], nxt, good, exact)
