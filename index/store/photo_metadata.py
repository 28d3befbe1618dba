"""What a photo file's header and EXIF say: when it was taken, by which camera, where,
its pixel size.

* **taken**: EXIF ``DateTimeOriginal``, else ``DateTimeDigitized``, else ``DateTime``
  (with its offset; none: UTC); else an indexed file's mtime (``taken_source`` "file").
* **camera**: ``Make`` and ``Model``, the make left out when the model starts with it.
* **place**: GPS in WGS84 degrees; None when missing, out of range or exactly (0, 0).

A broken value gives None for that field, never an exception.
"""

from __future__ import annotations

import io
import math
import os
import re
import warnings
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, BinaryIO

from PIL import Image

from groundsearch.model.runtime.images.photos import register_formats

register_formats()  # HEIC/HEIF and AVIF: their EXIF too

__all__ = ["PhotoMetadata", "read_metadata", "read_upload_metadata"]

#: The sub-IFDs of IFD0 and the tags read from each.
EXIF_IFD, GPS_IFD = 0x8769, 0x8825
MAKE, MODEL, ORIENTATION, DATE_TIME = 0x010F, 0x0110, 0x0112, 0x0132
DATE_TIME_ORIGINAL, DATE_TIME_DIGITIZED = 0x9003, 0x9004
OFFSET_TIME, OFFSET_TIME_ORIGINAL, OFFSET_TIME_DIGITIZED = 0x9010, 0x9011, 0x9012
GPS_LATITUDE_REF, GPS_LATITUDE, GPS_LONGITUDE_REF, GPS_LONGITUDE = 1, 2, 3, 4
#: The longest camera name and upload file name kept (longer ones are cut).
MAX_TEXT = 255
#: What goes wrong while parsing a damaged header or EXIF block.
BROKEN = (OSError, SyntaxError, ValueError, TypeError, KeyError, IndexError, EOFError,
          ZeroDivisionError, OverflowError, AttributeError, UnicodeError, MemoryError,
          RuntimeError, Image.DecompressionBombError)  # fmt: skip

_DATE = re.compile(r"\s*(\d{4})[:\-](\d{2})[:\-](\d{2})[ T](\d{2}):(\d{2}):(\d{2})")
_OFFSET = re.compile(r"\s*([+-])(\d{2}):?(\d{2})\s*$")


@dataclass(frozen=True)
class PhotoMetadata:
    """What a photo's file says about it (every field None when unknown)."""

    taken_at: float | None = None
    taken: str | None = None
    taken_source: str | None = None  # "exif" | "file"
    camera: str | None = None
    lat: float | None = None
    lon: float | None = None
    width: int | None = None
    height: int | None = None
    folder: str | None = None
    name: str | None = None

    @property
    def place(self) -> tuple[float, float] | None:
        """(lat, lon), or None without GPS."""
        return None if self.lat is None or self.lon is None else (self.lat, self.lon)


def read_metadata(path: Path) -> PhotoMetadata:
    """What an indexed photo file says, with its absolute folder and name (its mtime if
    no EXIF date). OSError only if it cannot be stat'ed."""
    full = os.path.abspath(path)
    mtime_ns = os.stat(full).st_mtime_ns
    folder, name = os.path.dirname(full), os.path.basename(full)
    try:
        with open(full, "rb") as fp:
            read = _read(fp)
    except BROKEN:
        read = PhotoMetadata()
    if read.taken_source is None:
        stamp = mtime_ns / 1e9
        when = datetime.fromtimestamp(mtime_ns // 1_000_000_000, UTC)
        read = replace(read, taken_at=stamp, taken=when.isoformat(), taken_source="file")
    return replace(read, folder=folder, name=name)


def read_upload_metadata(data: bytes, name: str | None) -> PhotoMetadata:
    """What an uploaded photo's bytes say (no mtime date), with its uploaded name."""
    try:
        read = _read(io.BytesIO(data))
    except BROKEN:
        read = PhotoMetadata()
    return replace(read, name=upload_name(name))


def upload_name(name: str | None) -> str | None:
    """A client's file name: its last path component, printable, at most ``MAX_TEXT``."""
    if not name:
        return None
    last = re.split(r"[/\\]", name)[-1]
    cleaned = "".join(c for c in last if c.isprintable()).strip()
    return cleaned[:MAX_TEXT] or None


def _read(fp: BinaryIO) -> PhotoMetadata:
    """Everything a photo's header says; one of ``BROKEN`` if Pillow cannot open it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a decompression-bomb warning: no pixels are read
        with Image.open(fp) as img:
            width, height = img.size
            # Image.getexif, not a plugin's: PNG's would decode the pixels to find a late chunk
            exif = _field(lambda: Image.Image.getexif(img))
            if exif is None:
                return PhotoMetadata(width=width, height=height)
            orientation = _field(lambda: exif.get(ORIENTATION))
            if orientation in (5, 6, 7, 8):
                width, height = height, width
            base = _field(lambda: dict(exif)) or {}
            sub = _field(lambda: dict(exif.get_ifd(EXIF_IFD))) or {}
            gps = _field(lambda: dict(exif.get_ifd(GPS_IFD))) or {}
    taken_at, taken = _field(lambda: _taken(base, sub)) or (None, None)
    lat, lon = _field(lambda: _place(gps)) or (None, None)
    camera = _field(lambda: _camera(base.get(MAKE), base.get(MODEL)))
    source = None if taken is None else "exif"
    return PhotoMetadata(taken_at, taken, source, camera, lat, lon, width, height)


def _field(read: Any) -> Any:
    """``read()``, or None when the value it reads is broken."""
    try:
        return read()
    except BROKEN:
        return None


def _text(value: Any) -> str | None:
    """An EXIF ASCII value as text (bytes decoded, NULs and surrounding blanks dropped)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    value = value.replace("\x00", " ").strip()
    return value or None


def _taken(base: dict[int, Any], sub: dict[int, Any]) -> tuple[float, str] | None:
    """(taken_at, taken) from the first usable date of the three EXIF dates."""
    for date, offset in (
        (sub.get(DATE_TIME_ORIGINAL), sub.get(OFFSET_TIME_ORIGINAL)),
        (sub.get(DATE_TIME_DIGITIZED), sub.get(OFFSET_TIME_DIGITIZED)),
        (base.get(DATE_TIME), sub.get(OFFSET_TIME)),
    ):
        found = exif_time(_text(date), _text(offset))
        if found is not None:
            return found
    return None


def exif_time(date: str | None, offset: str | None) -> tuple[float, str] | None:
    """An EXIF date and offset (``+02:00``) as (epoch seconds, ISO 8601), UTC without a
    valid offset; None for no date or an invalid one."""
    match = _DATE.match(date or "")
    if match is None:
        return None
    try:
        year, month, day, hour, minute, second = (int(g) for g in match.groups())
        when = datetime(year, month, day, hour, minute, second)  # the wall clock: no zone yet
    except ValueError:
        return None
    zone = _zone(offset)
    if zone is None:
        return when.replace(tzinfo=UTC).timestamp(), when.isoformat()
    aware = when.replace(tzinfo=zone)
    return aware.timestamp(), aware.isoformat()


def _zone(offset: str | None) -> timezone | None:
    match = _OFFSET.match(offset or "")
    if match is None:
        return None
    sign, hours, minutes = match.groups()
    delta = timedelta(hours=int(hours), minutes=int(minutes))
    if delta > timedelta(hours=14) or int(minutes) >= 60:  # no zone on Earth is further
        return None
    return timezone(-delta if sign == "-" else delta)


def _camera(make: Any, model: Any) -> str | None:
    """``Make Model``, the make left out when the model starts with it."""
    make_text, model_text = (" ".join((_text(v) or "").split()) for v in (make, model))
    if make_text and model_text.casefold().startswith(make_text.casefold()):
        make_text = ""
    name = f"{make_text} {model_text}".strip()
    return name[:MAX_TEXT] or None


def _place(gps: dict[int, Any]) -> tuple[float, float] | None:
    """(lat, lon) in WGS84 degrees from the GPS IFD, or None."""
    lat = _degrees(gps.get(GPS_LATITUDE), gps.get(GPS_LATITUDE_REF), "N", "S", 90.0)
    lon = _degrees(gps.get(GPS_LONGITUDE), gps.get(GPS_LONGITUDE_REF), "E", "W", 180.0)
    if lat is None or lon is None or (lat == 0.0 and lon == 0.0):
        return None
    return lat, lon


def _degrees(value: Any, ref: Any, positive: str, negative: str, limit: float) -> float | None:
    """Degrees, minutes and seconds (rationals) with their reference as signed degrees."""
    if value is None:
        return None
    parts = list(value) if isinstance(value, tuple | list) else [value]
    if not 1 <= len(parts) <= 3:
        return None
    numbers = [float(p) for p in parts]  # IFDRational; x/0 is nan
    if not all(math.isfinite(n) and n >= 0 for n in numbers):
        return None
    degrees = sum(n / 60**i for i, n in enumerate(numbers))
    side = (_text(ref) or positive).upper()[:1]
    if side not in (positive, negative) or degrees > limit:
        return None
    return round(-degrees if side == negative else degrees, 7)
