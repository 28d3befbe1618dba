"""Photo bytes or files → RGB images, with a pixel limit checked before decoding.

The one photo decoder of the project: the feature extractor reads gallery files with
it, the service reads uploads with it. Pillow reads width and height from the header
without decoding, so a decompression bomb is refused before it allocates anything.
Every photo comes out upright: a phone stores a portrait photo sideways with an EXIF
orientation (tag 0x0112) that says how to turn it, and ``upright`` applies it (Pillow's
``ImageOps.exif_transpose``). ``PhotoError.reason`` says which kind of problem it was
(the service turns it into an HTTP status).

``PHOTO_FORMATS`` is the one list of the formats a photo may be in — an upload's accepted
formats, the suffix its stored copy gets, the media types a photo is accepted and served
as, the names the API documents — and ``register_formats`` (run when this module is
imported) adds the two that Pillow reads through registry plugins: HEIC/HEIF
(``pillow-heif``: iPhones) and AVIF (``pillow-avif-plugin``: many Android phones). Every
reader of photos (this module, ``index/store/photo_metadata.py``) imports it first.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pillow_heif
from PIL import Image, ImageOps, JpegImagePlugin, UnidentifiedImageError


@dataclass(frozen=True)
class PhotoFormat:
    """A format photos may be in: its name for people and its files' suffixes (no dot),
    each with the media type it is served as; the first suffix is a stored copy's."""

    label: str
    suffixes: dict[str, str]

    @property
    def extension(self) -> str:
        """The suffix an uploaded photo's stored copy gets."""
        return next(iter(self.suffixes))

    @property
    def media_type(self) -> str:
        """The media type of a photo re-encoded in this format."""
        return next(iter(self.suffixes.values()))


#: Refuse photos larger than this many pixels unless told otherwise.
MAX_PIXELS = 40_000_000
#: The formats a photo may be in, by Pillow's name: what an upload may be, what the API
#: documents and serves. (The indexer tries every file, so it reads any format Pillow
#: reads; these are the ones it is meant for.)
PHOTO_FORMATS: dict[str, PhotoFormat] = {
    "JPEG": PhotoFormat("JPEG", {"jpg": "image/jpeg", "jpeg": "image/jpeg"}),
    "PNG": PhotoFormat("PNG", {"png": "image/png"}),
    "GIF": PhotoFormat("GIF", {"gif": "image/gif"}),
    "WEBP": PhotoFormat("WebP", {"webp": "image/webp"}),
    "BMP": PhotoFormat("BMP", {"bmp": "image/bmp"}),
    "TIFF": PhotoFormat("TIFF", {"tif": "image/tiff", "tiff": "image/tiff"}),
    # pillow-heif's one format for HEIF files: HEIC (HEVC-coded: an iPhone's) and others
    "HEIF": PhotoFormat(
        "HEIC/HEIF", {"heic": "image/heic", "heif": "image/heif", "hif": "image/heif"}
    ),
    "AVIF": PhotoFormat("AVIF", {"avif": "image/avif"}),
}
#: Formats an upload may be in, and the extension a stored copy gets.
EXTENSIONS = {name: fmt.extension for name, fmt in PHOTO_FORMATS.items()}
#: The media type of a photo file, by its suffix (lower case, with the dot).
MEDIA_TYPES = {
    f".{suffix}": media for fmt in PHOTO_FORMATS.values() for suffix, media in fmt.suffixes.items()
}
#: Formats whose orientation is a transform in the file's container (HEIF's and AVIF's
#: ``irot``/``imir`` boxes), which every viewer of the format applies: served as stored.
CONTAINER_TURNED = frozenset({"HEIF", "AVIF"})
#: The major and compatible brands (``ftyp`` box) of an ISO base media file of each format.
_BRANDS = {
    "AVIF": frozenset({b"avif", b"avis"}),
    "HEIF": frozenset(
        {b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"hevm", b"hevs", b"mif1", b"msf1"}
    ),
}
#: The EXIF tag of a photo's orientation: 1 upright, 2–8 mirrored and/or turned.
ORIENTATION = 0x0112
#: JPEG quality of a photo re-encoded upright (``upright_copy``).
UPRIGHT_JPEG_QUALITY = 95
#: JPEG quality of a thumbnail (``thumbnail_jpeg``).
THUMBNAIL_JPEG_QUALITY = 82
Reason = Literal["missing", "not-an-image", "unsupported", "too-large", "corrupt"]


def format_names(formats: Collection[str] = PHOTO_FORMATS) -> str:
    """The formats as people read them: ``"JPEG, PNG, …, HEIC/HEIF, AVIF"``."""
    return ", ".join(PHOTO_FORMATS[f].label if f in PHOTO_FORMATS else f for f in formats)


def upload_media_types() -> list[str]:
    """Every media type a photo upload may be sent as, in ``PHOTO_FORMATS`` order."""
    return list(dict.fromkeys(MEDIA_TYPES.values()))


_registered = False


def register_formats() -> None:
    """Teach Pillow HEIC/HEIF (``pillow-heif``) and AVIF (``pillow-avif-plugin``); once
    per process, run when this module is imported. Pillow's own plugins are loaded first,
    so the AVIF plugin's reader is the one every process uses (Pillow ≥ 11.3 has one of its
    own, over the same libavif, that would replace it whenever Pillow loads its plugins
    later). HEIF depth and auxiliary pictures (a portrait's depth map, an HDR gain map)
    are not read; the embedded thumbnails are, for ``decode_photo``'s draft."""
    global _registered
    if _registered:
        return
    Image.init()
    import pillow_avif  # noqa: F401  (registers its reader and writer when imported)

    pillow_heif.register_heif_opener(depth_images=False, aux_images=False)
    _registered = True


register_formats()


class PhotoError(ValueError):
    """A photo that cannot be used, naming it, with the kind of problem in ``reason``."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason


def decode_photo(
    source: Path | str | bytes,
    max_pixels: int = MAX_PIXELS,
    formats: Collection[str] | None = None,
    name: str | None = None,
    *,
    min_side: int | None = None,
) -> tuple[Image.Image, str]:
    """Decode a file or bytes to RGB; returns the image and its format (e.g. ``JPEG``).

    ``formats`` limits the accepted formats (Pillow's names); ``name`` labels the photo
    in messages (default: its path, or "the upload" for bytes). With ``min_side``, the
    photo is kept only as large as a model that resizes it to ``min_side`` needs: a JPEG is
    decoded at reduced scale (Pillow's DCT scaling: 1/2, 1/4 or 1/8), a HEIF from its
    smallest embedded thumbnail of at least ``min_side`` on both sides when it has one
    (pillow-heif's draft; a phone's are mostly smaller), and the result, or another
    format's full decode, is box-reduced by a whole factor, both sides staying at least
    ``min_side`` pixels; the pixel limit applies to the full size. An animated image gives
    its first frame (a HEIF or AVIF its primary picture), a JPEG with more pictures (MPO)
    its first picture, as ``JPEG``. The image is turned upright by its EXIF orientation
    after the draft (symmetric: both sides at least ``min_side``) and before the reduce,
    so the same photo stored with any orientation gives the same pixels; a HEIF comes
    out of its decoder upright already (libheif applies the file's rotation and mirror).
    A HEIF or AVIF file that Pillow cannot open (truncated, damaged) is ``corrupt``, with
    its decoder's message, not ``not-an-image``.
    """
    label = name or (str(source) if not isinstance(source, bytes) else "the upload")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as img:
                # a camera's JPEG with more pictures in it (MPO: a phone's depth or HDR
                # gain map) is a JPEG whose first picture is the photo
                fmt = "JPEG" if img.format == "MPO" else img.format or ""
                if formats is not None and fmt not in formats:
                    raise PhotoError(
                        "unsupported", f"{label}: unsupported image format {fmt or 'unknown'}"
                    )
                if img.width * img.height > max_pixels:
                    raise PhotoError(
                        "too-large",
                        f"{label}: image is {img.width}×{img.height} pixels, over the "
                        f"{max_pixels:,}-pixel limit",
                    )
                if min_side is not None:  # JPEG's and HEIF's own; a no-op for others
                    img.draft("RGB", (min_side, min_side))
                img.load()
                return _reduced(upright(img), min_side).convert("RGB"), fmt
    except PhotoError:
        raise
    except FileNotFoundError:
        raise PhotoError("missing", f"{label}: file not found") from None
    except UnidentifiedImageError:
        container = _container_format(source)
        if container is not None and (formats is None or container in formats):
            why = _open_error(container, source)
            raise PhotoError(
                "corrupt",
                f"{label}: the {PHOTO_FORMATS[container].label} image is truncated or corrupt "
                f"({why})",
            ) from None
        kinds = f"({format_names(formats)})" if formats is not None else "file Pillow can read"
        raise PhotoError("not-an-image", f"{label}: not an image {kinds}") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise PhotoError(
            "too-large", f"{label}: image has more pixels than the {max_pixels:,}-pixel limit"
        ) from None
    except (OSError, SyntaxError, ValueError, EOFError, MemoryError, RuntimeError) as exc:
        raise PhotoError("corrupt", f"{label}: the image is truncated or corrupt ({exc})") from None


def _container_format(source: Path | str | bytes) -> str | None:
    """``HEIF`` or ``AVIF`` when the file starts as one (an ISO base media file whose
    ``ftyp`` box names one of its brands), else None (also when it cannot be read)."""
    try:
        if isinstance(source, bytes):
            head = source[:64]
        else:
            with open(source, "rb") as fp:
                head = fp.read(64)
    except OSError:
        return None
    if len(head) < 12 or head[4:8] != b"ftyp":
        return None
    end = min(int.from_bytes(head[:4], "big"), len(head))
    brands = {head[8:12]} | {head[i : i + 4] for i in range(16, end - 3, 4)}
    return next((name for name, known in _BRANDS.items() if brands & known), None)


def _open_error(fmt: str, source: Path | str | bytes) -> str:
    """What ``fmt``'s reader says when it opens ``source`` (which Pillow could not)."""
    reader = Image.OPEN[fmt][0]
    try:
        fp = io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")  # noqa: SIM115
        with fp:
            reader(fp, "" if isinstance(source, bytes) else str(source)).close()
    except Exception as exc:  # the reader's own error: its message is the point
        return str(exc).strip() or type(exc).__name__
    return "its reader opens it alone"


def orientation_of(img: Image.Image) -> int:
    """``img``'s EXIF orientation (1–8); 1 when it has none, or an unreadable or invalid one."""
    try:
        value = img.getexif().get(ORIENTATION, 1)
    except (OSError, SyntaxError, ValueError, EOFError):
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


#: The transpose that stores an upright picture under each EXIF orientation: the inverse
#: of what a viewer (and ``upright``) applies — 6 says "turn 90° clockwise to view", so a
#: camera stores the scene turned 90° counter-clockwise, Pillow's ROTATE_90.
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


def as_stored(img: Image.Image, orientation: int) -> Image.Image:
    """The pixels a camera stores for the upright ``img`` under EXIF ``orientation``
    (what ``upright`` undoes; for tests and measurements of the turn)."""
    turn = STORED_TURN[orientation]
    return img if turn is None else img.transpose(turn)


def upright(img: Image.Image) -> Image.Image:
    """``img`` turned as its EXIF orientation says (the orientation tag then removed), or
    ``img`` itself when it is upright already."""
    if orientation_of(img) == 1:
        return img
    turned = ImageOps.exif_transpose(img)
    assert turned is not None  # not in place: always an image
    return turned


def photo_orientation(path: Path | str) -> int:
    """The EXIF orientation of a photo file (1 when it has none or cannot be read)."""
    try:
        with Image.open(path) as img:
            return orientation_of(img)
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError):
        return 1


def upright_copy(path: Path | str) -> tuple[bytes, str] | None:
    """A photo file whose EXIF orientation is not 1, turned upright and re-encoded in its
    own format, with that format (JPEG and WebP at quality ``UPRIGHT_JPEG_QUALITY``, the
    JPEG's chroma subsampling, the ICC profile and the other EXIF tags kept); None when
    the file is upright already or is not turned here (an animated image): serve it as
    it is; None too for a HEIF or AVIF, whose turn is in its container (``irot``/``imir``),
    which browsers and viewers of the format apply. OSError and the like when the file
    cannot be read or written."""
    with Image.open(path) as img:
        # a camera's JPEG with a second picture (MPO): its first, main picture, as a JPEG
        fmt = "JPEG" if img.format == "MPO" else img.format or ""
        if (
            orientation_of(img) == 1
            or fmt in CONTAINER_TURNED
            or (getattr(img, "n_frames", 1) > 1 and fmt != "JPEG")
        ):
            return None
        turned = upright(img)
        options: dict[str, object] = {"exif": turned.getexif()}
        if "icc_profile" in img.info:
            options["icc_profile"] = img.info["icc_profile"]
        if fmt == "JPEG":
            options["quality"] = UPRIGHT_JPEG_QUALITY
            if (sampling := JpegImagePlugin.get_sampling(img)) >= 0:
                options["subsampling"] = sampling
        elif fmt == "WEBP":
            options["quality"] = UPRIGHT_JPEG_QUALITY
            options["lossless"] = bool(img.info.get("lossless"))
        out = io.BytesIO()
        turned.save(out, format=fmt, **options)
        return out.getvalue(), fmt


def jpeg_copy(path: Path | str) -> bytes:
    """A photo file decoded upright and re-encoded as a JPEG at ``UPRIGHT_JPEG_QUALITY``
    (the ICC profile and the EXIF tags kept, less the orientation): a HEIC for a client
    that cannot show one. OSError and the like when the file cannot be read."""
    with Image.open(path) as img:
        turned = upright(img).convert("RGB")
        exif = turned.getexif()
        exif.pop(ORIENTATION, None)
        options: dict[str, object] = {"exif": exif, "quality": UPRIGHT_JPEG_QUALITY}
        if "icc_profile" in img.info:
            options["icc_profile"] = img.info["icc_profile"]
        out = io.BytesIO()
        turned.save(out, format="JPEG", **options)
        return out.getvalue()


def thumbnail_jpeg(
    source: Path | str | bytes, size: int, max_pixels: int = MAX_PIXELS
) -> tuple[bytes, tuple[int, int]]:
    """A photo as a small JPEG, upright, its longer side at most ``size`` pixels (never
    enlarged), with its pixel size: decoded at reduced scale (``decode_photo`` with
    ``min_side``: a phone's 12-megapixel JPEG is read at 1/8), then resampled
    (Lanczos) and encoded at ``THUMBNAIL_JPEG_QUALITY``. PhotoError as ``decode_photo``."""
    if size < 1:
        raise ValueError(f"size must be at least 1, got {size}")
    img, _ = decode_photo(source, max_pixels, min_side=size)
    img.thumbnail((size, size), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=THUMBNAIL_JPEG_QUALITY)
    return out.getvalue(), img.size


def _reduced(img: Image.Image, min_side: int | None) -> Image.Image:
    """``img`` box-reduced by the largest whole factor keeping both sides ≥ ``min_side``."""
    factor = min(img.size) // min_side if min_side else 1
    if factor < 2:
        return img
    try:
        return img.reduce(factor)
    except ValueError:  # a mode reduce() does not take (palette, 1-bit, …)
        return img.convert("RGB").reduce(factor)
