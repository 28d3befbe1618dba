"""The project's one photo decoder: bytes or files → upright RGB images, the pixel limit
read from the header (a decompression bomb is refused before decoding); ``PhotoError``
names the problem. ``register_formats`` (run on import) adds HEIC/HEIF and AVIF."""

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
    """A photo format: its name for people and its suffixes (no dot) with their media
    types; the first suffix is a stored copy's."""

    label: str
    suffixes: dict[str, str]

    @property
    def extension(self) -> str:
        return next(iter(self.suffixes))

    @property
    def media_type(self) -> str:
        return next(iter(self.suffixes.values()))


#: Refuse photos larger than this many pixels unless told otherwise.
MAX_PIXELS = 40_000_000
#: The formats a photo may be in, by Pillow's name (the indexer reads any Pillow reads).
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
#: Formats whose orientation is in the container (``irot``/``imir``): served as stored.
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
    """Teach Pillow HEIC/HEIF and AVIF, once per process. Pillow's own plugins load
    first, so the AVIF plugin's reader wins; HEIF depth and auxiliary pictures are not read."""
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
    """A file or bytes decoded to upright RGB, and its format. ``formats`` limits the
    formats, ``name`` labels the photo in messages; with ``min_side`` it is decoded at
    reduced scale, both sides staying at least ``min_side``."""
    label = name or (str(source) if not isinstance(source, bytes) else "the upload")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as img:
                fmt = _format(img)
                if formats is not None and fmt not in formats:
                    why = f"{label}: unsupported image format {fmt or 'unknown'}"
                    raise PhotoError("unsupported", why)
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
            kind, why = PHOTO_FORMATS[container].label, _open_error(container, source)
            message = f"{label}: the {kind} image is truncated or corrupt ({why})"
            raise PhotoError("corrupt", message) from None
        kinds = f"({format_names(formats)})" if formats is not None else "file Pillow can read"
        raise PhotoError("not-an-image", f"{label}: not an image {kinds}") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        message = f"{label}: image has more pixels than the {max_pixels:,}-pixel limit"
        raise PhotoError("too-large", message) from None
    except (OSError, SyntaxError, ValueError, EOFError, MemoryError, RuntimeError) as exc:
        raise PhotoError("corrupt", f"{label}: the image is truncated or corrupt ({exc})") from None


def _container_format(source: Path | str | bytes) -> str | None:
    """``HEIF`` or ``AVIF`` when the file's ``ftyp`` box names one of its brands, else None."""
    try:
        with io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb") as fp:
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


def upright(img: Image.Image) -> Image.Image:
    """``img`` turned as its EXIF orientation says (``img`` itself when upright)."""
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
    """A turned photo file re-encoded upright in its own format (ICC profile, EXIF and
    JPEG subsampling kept), with that format; None when it is to be served as it is
    (upright, animated, or turned by its container)."""
    with Image.open(path) as img:
        fmt = _format(img)
        if (
            orientation_of(img) == 1
            or fmt in CONTAINER_TURNED
            or (getattr(img, "n_frames", 1) > 1 and fmt != "JPEG")
        ):
            return None
        turned = upright(img)
        options = _kept(img, turned.getexif())
        if fmt in ("JPEG", "WEBP"):
            options["quality"] = UPRIGHT_JPEG_QUALITY
        if fmt == "JPEG" and (sampling := JpegImagePlugin.get_sampling(img)) >= 0:
            options["subsampling"] = sampling
        elif fmt == "WEBP":
            options["lossless"] = bool(img.info.get("lossless"))
        with io.BytesIO() as out:
            turned.save(out, format=fmt, **options)
            return out.getvalue(), fmt


def jpeg_copy(path: Path | str) -> bytes:
    """A photo file decoded upright as a JPEG (ICC profile and EXIF kept, less the
    orientation): a HEIC for a client that cannot show one."""
    with Image.open(path) as img, io.BytesIO() as out:
        turned = upright(img).convert("RGB")
        exif = turned.getexif()
        exif.pop(ORIENTATION, None)
        turned.save(out, format="JPEG", quality=UPRIGHT_JPEG_QUALITY, **_kept(img, exif))
        return out.getvalue()


def _format(img: Image.Image) -> str:
    """Pillow's format name, a camera's MPO (a JPEG with more pictures) as ``JPEG``."""
    return "JPEG" if img.format == "MPO" else img.format or ""


def _kept(img: Image.Image, exif: Image.Exif) -> dict[str, object]:
    """The save options that keep ``img``'s EXIF (``exif``) and ICC profile."""
    icc = {"icc_profile": img.info["icc_profile"]} if "icc_profile" in img.info else {}
    return {"exif": exif, **icc}


def thumbnail_jpeg(
    source: Path | str | bytes, size: int, max_pixels: int = MAX_PIXELS
) -> tuple[bytes, tuple[int, int]]:
    """A photo as an upright JPEG with its longer side at most ``size`` (never enlarged),
    and its pixel size. PhotoError as ``decode_photo``."""
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
