"""What a search may be narrowed to: a photo's date, folder, camera, place and source.

Each filter is declared once, in ``FILTER_PARAMS`` (routes, CLI flags, the client and the
page are made from it); a bad value raises ``FilterError`` (a 422). All must hold:

* ``after`` / ``before``: ``after <= taken_at < before`` (an unknown date never passes).
* ``folder``: the folder or under it, component by component; uploads never pass.
* ``camera``: equal, ignoring ASCII case.
* ``near`` with ``within_km`` (default 1 km): haversine distance; no GPS never passes.
* ``source``: ``folder`` or ``upload``.
"""

from __future__ import annotations

import math
import posixpath
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

#: The radius of ``near`` when ``within_km`` is not given.
DEFAULT_WITHIN_KM = 1.0
#: ``within`` trusts a flat (equirectangular) distance for circles up to this radius
#: away from the poles, except within ``FLAT_SLACK`` of the radius (its error there is
#: below 1e-4 of the distance: the haversine decides only the ring).
FLAT_UP_TO_KM = 100.0
FLAT_UP_TO_LAT = 80.0
FLAT_SLACK = 0.01
#: Half the Earth's circumference, about: a larger radius takes every photo with GPS.
MAX_WITHIN_KM = 20_000.0
#: The Earth's mean radius (IUGG), for the haversine distance.
EARTH_RADIUS_KM = 6371.0088
#: The dates a filter may name: 0001-01-01 to 9999-12-31 (what ISO 8601 dates can say).
_FIRST_S = -62_135_596_800.0
_LAST_S = 253_402_300_800.0


@dataclass(frozen=True)
class FilterParam:
    """One filter as every front asks for it: the route, the CLI, the client, the page."""

    name: str  #: the query parameter and the client's keyword; the CLI's flag is --name-dashed
    label: str  #: the page's label
    #: how a value is written: ``date`` (ISO 8601 date or date-time), ``text``, ``place``
    #: ("latitude,longitude"), ``km`` (a positive number), ``choice`` (one of ``choices``)
    kind: str
    help: str  #: what passes, in a sentence
    example: str  #: a value, for placeholders and help
    choices: tuple[str, ...] = ()
    max_length: int | None = None  #: for text


#: The photo filters, in the order forms show them.
FILTER_PARAMS: tuple[FilterParam, ...] = (
    FilterParam("after", "From", "date", "Only photos taken at or after this.", "2024-06-01"),
    FilterParam("before", "To", "date", "Only photos taken before this.", "2024-09-01"),
    FilterParam(
        "folder",
        "Folder",
        "text",
        "Only photos indexed from this folder or a folder inside it (an absolute path, "
        "compared by whole path components).",
        "/photos/2024",
        max_length=4096,
    ),
    FilterParam(
        "camera",
        "Camera",
        "text",
        "Only photos taken with this camera, as hits name it (case does not matter).",
        "Apple iPhone 12",
        max_length=200,
    ),
    FilterParam(
        "near",
        "Near",
        "place",
        "Only photos taken near this place: 'latitude,longitude' in decimal degrees; "
        "photos without GPS never pass.",
        "48.8584,2.2945",
    ),
    FilterParam("within_km", "km", "km", "The radius of 'near' in kilometres (default 1).", "5"),
    FilterParam(
        "source",
        "Source",
        "choice",
        "Only photos indexed from folders (folder), or only those uploaded (upload).",
        "folder",
        choices=("folder", "upload"),
    ),
)
FILTER_NAMES = tuple(param.name for param in FILTER_PARAMS)


SOURCES = FILTER_PARAMS[FILTER_NAMES.index("source")].choices


class FilterError(ValueError):
    """A filter value that is not one; ``parameter`` names the query parameter."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(message)
        self.parameter = parameter


def _number(value: Any, parameter: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise FilterError(parameter, f"{parameter} must be {what}, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise FilterError(parameter, f"{parameter} must be a finite number, got {value!r}")
    return number


def _text(value: Any, parameter: str) -> str:
    if not isinstance(value, str):
        raise FilterError(parameter, f"{parameter} must be text, got {value!r}")
    text = value.strip()
    if not text:
        raise FilterError(parameter, f"{parameter} must not be empty")
    if "\x00" in text:
        raise FilterError(parameter, f"{parameter} must not contain a NUL character")
    return text


@dataclass(frozen=True)
class PhotoFilter:
    """Conditions a photo must meet to be a hit (the module says each), checked and
    normalised when made (``FilterError`` for a bad value)."""

    after: float | None = None
    before: float | None = None
    folder: str | None = None
    camera: str | None = None
    near: tuple[float, float] | None = None
    within_km: float | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        for name in ("after", "before"):
            value = getattr(self, name)
            if value is not None:
                value = _number(value, name, "seconds since the epoch")
                if not _FIRST_S <= value < _LAST_S:
                    raise FilterError(name, f"{name} must lie in the years 1 to 9999")
                put(name, value)
        if self.after is not None and self.before is not None and self.after >= self.before:
            raise FilterError("before", "before must be later than after")
        if self.folder is not None:
            folder = _text(self.folder, "folder")
            if not folder.startswith("/"):
                raise FilterError("folder", f"folder must be an absolute path, got {folder!r}")
            put("folder", "/" + posixpath.normpath(folder).lstrip("/"))
        if self.camera is not None:
            put("camera", _text(self.camera, "camera"))
        if self.near is not None:
            put("near", _place(self.near))
        if self.within_km is not None:
            if self.near is None:
                raise FilterError("within_km", "within_km needs near (a latitude,longitude)")
            km = _number(self.within_km, "within_km", "a distance in kilometres")
            if not 0 < km <= MAX_WITHIN_KM:
                raise FilterError(
                    "within_km", f"within_km must be above 0 and at most {MAX_WITHIN_KM:g}"
                )
            put("within_km", km)
        if self.source is not None and self.source not in SOURCES:
            raise FilterError("source", f"source must be one of {', '.join(SOURCES)}")

    def __bool__(self) -> bool:
        """Whether any condition is set (an empty filter passes every photo)."""
        return any(getattr(self, name) is not None for name in _FIELDS)

    @property
    def radius_km(self) -> float:
        """The radius of ``near``: ``within_km``, or 1 km."""
        return DEFAULT_WITHIN_KM if self.within_km is None else self.within_km

    @property
    def conditions(self) -> tuple[str, ...]:
        """The conditions set, by name: ``date``, ``folder``, ``camera``, ``near``, ``source``."""
        names = ("date",) if self.after is not None or self.before is not None else ()
        return names + tuple(n for n in CONDITIONS[1:] if getattr(self, n) is not None)

    @classmethod
    def from_query(
        cls,
        after: str | float | None = None,
        before: str | float | None = None,
        folder: str | None = None,
        camera: str | None = None,
        near: str | tuple[float, float] | None = None,
        within_km: str | float | None = None,
        source: str | None = None,
    ) -> PhotoFilter:
        """A filter from query-string values: ISO 8601 dates, ``near`` as ``"lat,lon"``."""
        if isinstance(within_km, str):
            within_km = _parse_number(within_km, "within_km")
        return cls(
            after=None if after is None else parse_time(after, "after"),
            before=None if before is None else parse_time(before, "before"),
            folder=folder,
            camera=camera,
            near=_parse_place(near) if isinstance(near, str) else near,
            within_km=within_km,
            source=source,
        )

    def masks(self, columns: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Which rows pass each condition, by name, over columns as ``filter_sample``
        returns them (NaN or None when unknown)."""
        out: dict[str, np.ndarray] = {}
        if "date" in self.conditions:
            taken = np.asarray(columns["taken_at"], np.float64)
            known = ~np.isnan(taken)
            ok = known.copy()
            if self.after is not None:
                ok &= np.where(known, taken, np.inf) >= self.after
            if self.before is not None:
                ok &= np.where(known, taken, -np.inf) < self.before
            out["date"] = ok
        if self.folder is not None:
            folder, under = self.folder, self.folder.rstrip("/") + "/"
            out["folder"] = Categorical.of(columns["folder"]).where(
                lambda f: f == folder or f.startswith(under), within=(folder, under[:-1] + "0")
            )
        if self.camera is not None:
            wanted = self.camera.lower()
            out["camera"] = Categorical.of(columns["camera"]).where(lambda c: c == wanted)
        if self.near is not None:
            out["near"] = self.within(columns["lat"], columns["lon"])
        if self.source is not None:
            uploaded = np.asarray(columns["uploaded"], bool)
            out["source"] = uploaded if self.source == "upload" else ~uploaded
        return out

    def within(self, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
        """Which places lie within ``radius_km`` of ``near`` (NaN: no), computed only in
        the circle's band of latitude."""
        if self.near is None:
            raise ValueError("this filter has no near")
        lat, lon = np.asarray(lat, np.float64), np.asarray(lon, np.float64)
        band = math.degrees(self.radius_km / EARTH_RADIUS_KM) * (1 + 1e-9) + 1e-9
        lat0, lon0, radius = self.near[0], self.near[1], self.radius_km
        with np.errstate(invalid="ignore"):
            out = np.abs(lat - lat0) <= band  # NaN: False
            rows = np.flatnonzero(out)
            la, lo = lat[rows], lon[rows]
            if radius > FLAT_UP_TO_KM or abs(lat0) > FLAT_UP_TO_LAT:
                out[rows] = haversine_km(lat0, lon0, la, lo) <= radius
                return out
            # a flat (equirectangular) distance decides all but a thin ring about the
            # circle, where the haversine decides
            dlon = np.radians((lo - lon0 + 540.0) % 360.0 - 180.0)
            x = dlon * np.cos(np.radians((la + lat0) / 2))
            y = np.radians(la - lat0)
            flat = EARTH_RADIUS_KM * np.sqrt(x * x + y * y)
            ok = flat <= radius * (1 - FLAT_SLACK)
            ring = np.flatnonzero(~ok & (flat < radius * (1 + FLAT_SLACK)))
            ok[ring] = haversine_km(lat0, lon0, la[ring], lo[ring]) <= radius
            out[rows] = ok
        return out


#: The conditions a filter can hold, by name (``after`` and ``before`` make one: date).
CONDITIONS = ("date", "folder", "camera", "near", "source")
_FIELDS = FILTER_NAMES


def _place(value: Any) -> tuple[float, float]:
    if isinstance(value, str) or not hasattr(value, "__len__") or len(value) != 2:
        raise FilterError("near", f"near must be a latitude and a longitude, got {value!r}")
    lat = _number(value[0], "near", "a latitude in degrees")
    lon = _number(value[1], "near", "a longitude in degrees")
    if not -90 <= lat <= 90:
        raise FilterError("near", f"near: the latitude must lie in [-90, 90], got {lat:g}")
    if not -180 <= lon <= 180:
        raise FilterError("near", f"near: the longitude must lie in [-180, 180], got {lon:g}")
    return lat, lon


def _parse_number(text: str, parameter: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise FilterError(parameter, f"{parameter} must be a number, got {text!r}") from None


def _parse_place(text: str) -> tuple[float, float]:
    parts = text.split(",")
    if len(parts) != 2:
        raise FilterError("near", f"near must be 'latitude,longitude', got {text!r}")
    return _parse_number(parts[0], "near"), _parse_number(parts[1], "near")


def parse_time(value: str | float, parameter: str) -> float:
    """Epoch seconds of an ISO 8601 date or date-time (no offset: UTC), or of a number."""
    if not isinstance(value, str):
        return _number(value, parameter, "a date")
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise FilterError(
            parameter, f"{parameter} must be an ISO 8601 date or date and time, got {value!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def floats(values: Sequence[Any]) -> np.ndarray:
    """Values as a float64 array, NaN for None (an unknown)."""
    return np.array([np.nan if v is None else v for v in values], np.float64)


def haversine_km(lat0: float, lon0: float, lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    """Great-circle distances in km from (lat0, lon0) to each (lat, lon), in degrees."""
    p0, p = math.radians(lat0), np.radians(lat)
    dp, dl = p - p0, np.radians(lon) - math.radians(lon0)
    h = np.sin(dp / 2) ** 2 + math.cos(p0) * np.cos(p) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0)))


@dataclass(frozen=True)
class Categorical:
    """A text column as its sorted distinct values and a code per row (-1: None), so a
    condition is tested once per distinct value."""

    values: list[str]  # sorted
    codes: np.ndarray

    @classmethod
    def of(cls, column: Categorical | Sequence[str | None] | np.ndarray) -> Categorical:
        if isinstance(column, Categorical):
            return column
        values = sorted({v for v in column if v is not None})
        index = {v: i for i, v in enumerate(values)}
        codes = np.array([-1 if v is None else index[v] for v in column], np.int32)
        return cls(values, codes)

    def where(
        self, test: Callable[[str], bool], within: tuple[str, str] | None = None
    ) -> np.ndarray:
        """Which rows hold a value passing ``test`` (None never does); ``within``: the
        range [low, high) of values that may pass."""
        lo, hi = 0, len(self.values)
        if within is not None:
            lo, hi = bisect_left(self.values, within[0]), bisect_left(self.values, within[1])
        passing = np.zeros(len(self.values) + 1, dtype=bool)  # the last: code -1, None
        passing[lo:hi] = [test(v) for v in self.values[lo:hi]]
        return passing[self.codes]
