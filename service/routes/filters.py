"""The query parameters every photo search shares: its filters, its order and its page.

``/search``, ``/search/image``, ``/images/{id}/similar`` and ``/arithmetic`` take them;
each is read into an ``index.filters.PhotoFilter`` (applied inside the vector search) and
a ``Paging`` (``service.pages``). A value that cannot be used is a 422 problem naming its
parameter (``FilterError``, ``CursorError``: ``service.app``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Annotated, Literal

from fastapi import Depends, Query
from pydantic import BeforeValidator

from groundsearch.index.filters import PhotoFilter
from groundsearch.service.pages import ORDERS

DATE_HELP = (
    "A date (2024-06-01: its midnight, UTC) or a date-time (2024-06-01T18:30:00+02:00; "
    "without an offset, read as UTC). Compared with when each photo was taken (its EXIF "
    "DateTimeOriginal, else its file's time); a photo with neither never passes."
)
_LAT = r"[-+]?(90(\.0+)?|[1-8]?\d(\.\d+)?)"
_LON = r"[-+]?(180(\.0+)?|(1[0-7]\d|[1-9]?\d)(\.\d+)?)"
#: ``near``: "latitude,longitude" in decimal degrees, each in its range.
NEAR_PATTERN = rf"^{_LAT},{_LON}$"

_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")


def _not_a_number(value: object) -> object:
    """Refuse a bare number: pydantic would read it as seconds since the epoch, but the
    schema (and the docs) say a date or a date-time."""
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        raise ValueError("must be a date (2024-06-01) or a date-time, not a number")
    return value


After = Annotated[
    datetime | date | None,
    BeforeValidator(_not_a_number),
    Query(description=f"Only photos taken at or after this. {DATE_HELP}"),
]
Before = Annotated[
    datetime | date | None,
    BeforeValidator(_not_a_number),
    Query(description=f"Only photos taken before this. {DATE_HELP}"),
]
Folder = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=4096,
        description="Only photos indexed from this folder or a folder inside it (an "
        "absolute path, e.g. /photos/2024; compared by whole path components).",
    ),
]
Camera = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=200,
        description="Only photos taken with this camera, as hits name it ('Apple iPhone 12'; "
        "case does not matter).",
    ),
]
Near = Annotated[
    str | None,
    Query(
        max_length=60,
        pattern=NEAR_PATTERN,
        description="Only photos taken near this place: 'latitude,longitude' in decimal "
        "degrees (e.g. '48.8584,2.2945'); photos without GPS never pass.",
    ),
]
WithinKm = Annotated[
    float | None,
    Query(
        gt=0,
        le=20000,
        description="The radius of 'near' in kilometres (default 1). Only with 'near'.",
    ),
]
Source = Annotated[
    Literal["folder", "upload"] | None,
    Query(description="Only photos indexed from folders, or only those uploaded."),
]
OrderParam = Annotated[
    Literal["relevance", "date", "-date"],
    Query(
        description="'relevance' (default): best match first, weak hits included; 'date' / "
        "'-date': only the hits at or above min_relevance, oldest / newest first (photos "
        "without a date last).",
    ),
]
CursorParam = Annotated[
    str | None,
    Query(
        max_length=500,
        description="The 'next' of the previous page, to read the page after it (same query, "
        "filters and order).",
    ),
]


def photo_filter(
    after: After = None,
    before: Before = None,
    folder: Folder = None,
    camera: Camera = None,
    near: Near = None,
    within_km: WithinKm = None,
    source: Source = None,
) -> PhotoFilter:
    """The filters of a request (FilterError, a 422, for values that cannot be used)."""
    return PhotoFilter.from_query(
        _seconds(after), _seconds(before), folder, camera, near, within_km, source
    )


def _seconds(moment: datetime | date | None) -> float | None:
    """A date (its midnight) or date-time as epoch seconds, UTC when it names no offset."""
    if moment is None:
        return None
    if not isinstance(moment, datetime):
        moment = datetime.combine(moment, time())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


@dataclass(frozen=True)
class Paging:
    """How a request wants its hits: their order and the page after ``cursor``."""

    order: str = ORDERS[0]
    cursor: str | None = None


def paging(order: OrderParam = "relevance", cursor: CursorParam = None) -> Paging:
    return Paging(order, cursor)


Filters = Annotated[PhotoFilter, Depends(photo_filter)]
PagingDep = Annotated[Paging, Depends(paging)]
