"""The query parameters every photo search shares: its filters (made from
``FILTER_PARAMS``, described by ``GET /filters``), its order and its page."""

from __future__ import annotations

import inspect
import re
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, BeforeValidator, Field

from groundsearch.index.filters.conditions import (
    FILTER_PARAMS,
    MAX_WITHIN_KM,
    FilterParam,
    PhotoFilter,
)
from groundsearch.index.ranking.pages import ORDERS, Order

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


OrderParam = Annotated[
    Order,
    Query(
        description="'relevance' (default): best match first, weak hits included; 'date' / "
        "'-date': only the hits at or above min_relevance, oldest / newest first (photos "
        "without a date last)."
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


def _parameter(param: FilterParam) -> Any:
    """A filter's query parameter (``index.filters.conditions.FILTER_PARAMS``) as FastAPI
    reads and documents it."""
    help = f"{param.help} E.g. {param.example}."
    if param.kind == "date":
        return Annotated[
            datetime | date | None,
            BeforeValidator(_not_a_number),
            Query(description=f"{param.help} {DATE_HELP}"),
        ]
    if param.kind == "text":
        return Annotated[
            str | None, Query(min_length=1, max_length=param.max_length, description=help)
        ]
    if param.kind == "place":
        return Annotated[str | None, Query(max_length=60, pattern=NEAR_PATTERN, description=help)]
    if param.kind == "km":
        return Annotated[float | None, Query(gt=0, le=MAX_WITHIN_KM, description=help)]
    if param.kind == "choice":
        choice = Literal[param.choices]  # type: ignore[name-defined]
        return Annotated[choice | None, Query(description=param.help)]
    raise ValueError(f"unknown filter kind {param.kind!r}")


async def photo_filter(**values: Any) -> PhotoFilter:
    """The filters of a request (FilterError, a 422, for values that cannot be used);
    ``async`` as ``service.http.deps``' are: no thread-pool hop for a few checks."""
    for param in FILTER_PARAMS:
        if param.kind == "date":
            values[param.name] = _seconds(values[param.name])
    return PhotoFilter.from_query(**values)


# FastAPI reads a dependency's parameters from its signature: one per declared filter
photo_filter.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter(
            p.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=_parameter(p)
        )
        for p in FILTER_PARAMS
    ],
    return_annotation=PhotoFilter,
)


class FilterSpec(BaseModel):
    """One photo filter, as ``GET /filters`` describes it (the page builds its form from
    these; the client checks its keywords against them)."""

    name: str = Field(description="the query parameter")
    label: str = Field(description="a short label for a form")
    kind: Literal["date", "text", "place", "km", "choice"]
    help: str
    example: str
    choices: list[str] = Field(default_factory=list, description="for kind 'choice'")
    max_length: int | None = Field(default=None, description="for kind 'text'")
    maximum: float | None = Field(default=None, description="for kind 'km'")


router = APIRouter(tags=["photos"])


@router.get("/filters", response_model=list[FilterSpec])
def filters() -> list[FilterSpec]:
    """The photo filters that ``/search``, ``/search/image``, ``/images``,
    ``/images/{id}/similar`` and ``/arithmetic`` take, as query parameters."""
    return SPECS


SPECS = [
    FilterSpec(**asdict(p), maximum=MAX_WITHIN_KM if p.kind == "km" else None)
    for p in FILTER_PARAMS
]


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


async def paging(order: OrderParam = "relevance", cursor: CursorParam = None) -> Paging:
    return Paging(order, cursor)


Filters = Annotated[PhotoFilter, Depends(photo_filter)]
PagingDep = Annotated[Paging, Depends(paging)]
