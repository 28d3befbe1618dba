"""Photos with real EXIF blocks, the way cameras and phones write them, for the metadata
tests: Pillow writes the block (IFD0 with Make, Model, Orientation and DateTime, the Exif
IFD 0x8769 with DateTimeOriginal and OffsetTimeOriginal, the GPS IFD 0x8825 with
latitude and longitude as degree/minute/second rationals and their N/S/E/W refs)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from PIL import Image
from PIL.TiffImagePlugin import IFDRational

from tests.oriented import ENCODE, as_stored


@dataclass(frozen=True)
class Exif:
    """What to write into a photo's EXIF block (None: leave the tag out)."""

    original: str | None = None  # DateTimeOriginal, "YYYY:MM:DD HH:MM:SS"
    offset: str | None = None  # OffsetTimeOriginal, "+02:00"
    date_time: str | None = None  # IFD0 DateTime
    make: str | None = None
    model: str | None = None
    orientation: int | None = None
    lat: float | None = None  # written as DMS rationals with a N/S ref
    lon: float | None = None  # … with an E/W ref


def dms(degrees: float) -> tuple[IFDRational, IFDRational, IFDRational]:
    """|degrees| as (degrees, minutes, seconds/100) rationals, as a GPS receiver writes."""
    value = Fraction(abs(degrees)).limit_denominator(10**9)
    whole = int(value)
    minutes = int((value - whole) * 60)
    seconds = (value - whole - Fraction(minutes, 60)) * 3600
    hundredths = round(seconds * 100)
    return IFDRational(whole, 1), IFDRational(minutes, 1), IFDRational(hundredths, 100)


def exif_block(tags: Exif) -> Image.Exif:
    exif = Image.Exif()
    for tag, value in ((0x010F, tags.make), (0x0110, tags.model), (0x0132, tags.date_time)):
        if value is not None:
            exif[tag] = value
    if tags.orientation is not None:
        exif[0x0112] = tags.orientation
    if tags.original is not None or tags.offset is not None:
        sub = exif.get_ifd(0x8769)
        if tags.original is not None:
            sub[0x9003] = tags.original
        if tags.offset is not None:
            sub[0x9011] = tags.offset
    if tags.lat is not None and tags.lon is not None:
        gps = exif.get_ifd(0x8825)
        gps[1], gps[2] = ("N" if tags.lat >= 0 else "S"), dms(tags.lat)
        gps[3], gps[4] = ("E" if tags.lon >= 0 else "W"), dms(tags.lon)
    return exif


def photo_bytes(
    upright: Image.Image,
    tags: Exif | None = None,
    fmt: str = "JPEG",
    exif: Image.Exif | None = None,
) -> bytes:
    """``upright`` stored as a camera stores it under ``tags.orientation`` (turned), with
    the EXIF block of ``tags`` (or ``exif`` as given; neither: no EXIF at all)."""
    block = exif if exif is not None else exif_block(tags) if tags is not None else None
    orientation = tags.orientation if tags is not None and tags.orientation else 1
    stored = as_stored(upright.convert("RGB"), orientation)
    out = io.BytesIO()
    options = (ENCODE[fmt] | {"quality": 90}) if fmt in ENCODE else {}
    if block is not None:  # as bytes: pillow-heif turns a HEIF by EXIF bytes only
        options["exif"] = block.tobytes()
    stored.save(out, format=fmt, **options)
    return out.getvalue()


def write_photo(
    path: Path, upright: Image.Image, tags: Exif | None = None, fmt: str = "JPEG"
) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(photo_bytes(upright, tags, fmt))
    return path
