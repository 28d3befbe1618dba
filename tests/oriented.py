"""A real photo stored with each of the 8 EXIF orientations, the way a camera stores it.

A camera writes the sensor's pixels as they are and an orientation (EXIF tag 0x0112)
that tells a viewer how to turn them. Here each stored picture is the upright photo
turned by the inverse of what its orientation tells the viewer to do, so every file
shows the same upright picture; Pillow writes the EXIF block.
"""

from __future__ import annotations

import io
from pathlib import Path

import skimage.data
from PIL import Image

#: The transpose that stores an upright picture under each EXIF orientation (the inverse
#: of what ``photos.upright`` applies).
STORED_TURN: dict[int, Image.Transpose | None] = {
    1: None,
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_90,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_270,
}
ORIENTATIONS = tuple(STORED_TURN)
#: Pillow's name of each format, and the suffix of its files (HEIF and AVIF: written by
#: pillow-heif and pillow-avif-plugin, which store the orientation as the container's
#: rotation and mirror boxes, as phones do).
SUFFIX = {
    "PNG": "png",
    "JPEG": "jpg",
    "WEBP": "webp",
    "TIFF": "tif",
    "HEIF": "heic",
    "AVIF": "avif",
}
#: How lossy formats are written: quality 95; HEIF and AVIF with their encoders' fastest
#: settings (x265's ultrafast preset, AV1 speed 10), real files at a tenth of the time.
ENCODE: dict[str, dict[str, object]] = {
    "JPEG": {"quality": 95},
    "HEIF": {"quality": 95, "enc_params": {"preset": "ultrafast"}},
    "AVIF": {"quality": 95, "speed": 10},
}


def coffee(size: tuple[int, int] | None = None) -> Image.Image:
    """scikit-image's coffee photo (600×400, landscape), RGB, resized to ``size``."""
    photo = Image.fromarray(skimage.data.coffee())
    return photo.resize(size, Image.Resampling.BICUBIC) if size else photo


def as_stored(img: Image.Image, orientation: int) -> Image.Image:
    """The pixels a camera stores for the upright ``img`` under EXIF ``orientation``."""
    turn = STORED_TURN[orientation]
    return img if turn is None else img.transpose(turn)


def oriented_bytes(upright: Image.Image, orientation: int, fmt: str = "PNG", **options) -> bytes:
    """``upright`` stored with EXIF ``orientation`` in ``fmt`` (JPEG, HEIF, AVIF: quality 95)."""
    exif = Image.Exif()
    exif[0x0112] = orientation
    options = ENCODE.get(fmt, {}) | options
    out = io.BytesIO()
    # as bytes: pillow-heif reads the orientation it writes as the HEIF's rotation and
    # mirror from EXIF bytes only (an Image.Exif would leave a HEIF shown as stored)
    as_stored(upright, orientation).save(out, format=fmt, exif=exif.tobytes(), **options)
    return out.getvalue()


def write_oriented(upright: Image.Image, folder: Path, fmt: str = "PNG") -> list[Path]:
    """The 8 files ``o1``…``o8`` of ``upright`` in ``folder``, in orientation order."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for orientation in ORIENTATIONS:
        path = folder / f"o{orientation}.{SUFFIX[fmt]}"
        path.write_bytes(oriented_bytes(upright, orientation, fmt))
        paths.append(path)
    return paths
