"""Pages of a ranked answer: its order, a cursor, and the total above the relevance cutoff.

Orders: ``relevance`` (the good matches, relevance ≥ ``min_relevance`` among the first
``WINDOW`` hits, by score, then the rest, split into ``results`` and ``weak``) and
``date`` / ``-date`` (only the good matches; undated last, ties by id). The cursor is opaque
base64url JSON (the last hit's key and id, the order, a fingerprint of query and filters);
``total`` counts the good matches in the window (``total_exact`` false when it ends above).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import astuple, dataclass
from typing import Any, Literal, get_args

import numpy as np

from groundsearch.index.hits import Hit, Ranking

#: The most hits of a ranking a page or a total reads.
WINDOW = 1000
#: The orders a route accepts (``ORDERS``: the same as a tuple, the first the default).
Order = Literal["relevance", "date", "-date"]
ORDERS: tuple[Order, ...] = get_args(Order)
#: A cursor's JSON keys, in the order of its fields.
_KEYS = "ogkinq"


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
        body = dict(zip(_KEYS, astuple(self), strict=True))
        raw = json.dumps(body, separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str, order: str, query: str) -> Cursor:
        """The cursor in ``text``; CursorError if malformed or not this query's."""
        try:
            body = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            o, g, k, i, n, q = (body[key] for key in _KEYS)
            cursor = cls(str(o), int(g), float(k), int(i), int(n), q)
            if not math.isfinite(cursor.key) or cursor.group not in (0, 1) or cursor.served < 0:
                raise ValueError(text)
            if not isinstance(q, str):
                raise TypeError(text)
        except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
            raise CursorError(
                "the cursor is malformed: pass the 'next' of a previous page"
            ) from None
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
Fetch = Callable[[int], Ranking]
#: a ranking → each hit's relevance (NaN where it has none; None: no model).
Judge = Callable[[Ranking], "Sequence[float] | np.ndarray | None"]


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
    """The page of ``k`` hits after ``cursor`` of a ranking read through ``fetch``, in
    ``order``, with its next cursor and the total above ``threshold``. ``monotone``:
    relevance never rises down the ranking. Sort keys ascend by (group, key, id)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    n = max(window, 2 * k + (cursor.served if cursor else 0))
    while True:
        ranking = fetch(n)
        m = len(ranking)
        scores = np.asarray(ranking.scores, np.float64)
        judged = judge(ranking)
        relevance = np.full(m, np.nan) if judged is None else np.asarray(judged, np.float64)
        above = np.ones(m, bool) if threshold is None else ~(relevance < threshold)
        ended = m < n  # the whole ranking is read
        below = monotone and m > 0 and not above[-1]  # past the cutoff
        good = above & (np.arange(m) < window)  # the good matches: of the window
        if order == "relevance":
            group, key = np.where(good, 0, 1), -scores
            # sure of the order above the last score fetched (a tie may go on past it)
            sure = good | (scores > scores[-1]) if m and not ended else np.ones(m, bool)
        else:
            taken = ranking.taken_at if ranking.taken_at is not None else np.full(m, np.nan)
            dated = ~np.isnan(taken)
            group = np.where(dated, 0, 1)
            key = np.where(dated, taken if order == "date" else -taken, 0.0)
            sure = good.copy()  # a date order lists good ones
        if cursor is not None:
            sure &= (group > cursor.group) | (group == cursor.group) & (
                (key > cursor.key) | (key == cursor.key) & (ranking.ids > cursor.id)
            )
        pool = np.flatnonzero(sure)
        pool = pool[np.lexsort((ranking.ids[pool], key[pool], group[pool]))]
        if order == "relevance" and pool.size <= k and not ended:
            n *= 2  # ties at the last score fetched hid the rest of the page
            continue
        hits: list[Hit[Any]] = [
            Hit(
                int(ranking.ids[i]),
                float(scores[i]),
                taken_at=_number(ranking.taken_at, i),
                relevance=_number(relevance, i),
            )
            for i in pool[:k]
        ]
        served = (cursor.served if cursor else 0) + len(hits)
        nxt = None
        if pool.size > k and hits:
            last = pool[k - 1]
            at = (int(group[last]), float(key[last]), int(ranking.ids[last]))
            nxt = Cursor(order, *at, served, query).encode()
        return Page(hits, nxt, int(good.sum()), bool(ended or below))


def _number(values: np.ndarray | None, i: int) -> float | None:
    """``values[i]`` as a float, None where it is NaN (or there are no values)."""
    if values is None or np.isnan(values[i]):
        return None
    return float(values[i])
