"""Photo bytes or files → RGB images, with a pixel limit checked before decoding.

The one photo decoder of the project: the feature extractor reads gallery files with
it, the service reads uploads with it. Pillow reads width and height from the header
without decoding, so a decompression bomb is refused before it allocates anything.
``PhotoError.reason`` says which kind of problem it was (the service turns it into an
HTTP status).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Literal

from PIL import Image, UnidentifiedImageError
from PIL.JpegImagePlugin import JpegImageFile

#: Refuse photos larger than this many pixels unless told otherwise.
MAX_PIXELS = 40_000_000
#: Formats an upload may be in, and the extension a stored copy gets.
EXTENSIONS = {
    "JPEG": "jpg",
    "PNG": "png",
    "GIF": "gif",
    "WEBP": "webp",
    "BMP": "bmp",
    "TIFF": "tif",
}
Reason = Literal["missing", "not-an-image", "unsupported", "too-large", "corrupt"]


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
    decoded at reduced scale (Pillow's DCT scaling: 1/2, 1/4 or 1/8), another format is
    box-reduced by a whole factor right after decoding, both sides staying at least
    ``min_side`` pixels; the pixel limit applies to the full size. An animated image gives
    its first frame.
    """
    label = name or (str(source) if not isinstance(source, bytes) else "the upload")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as img:
                fmt = img.format or ""
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
                if min_side is not None and isinstance(img, JpegImageFile):
                    img.draft("RGB", (min_side, min_side))
                img.load()
                return _reduced(img, min_side).convert("RGB"), fmt
    except PhotoError:
        raise
    except FileNotFoundError:
        raise PhotoError("missing", f"{label}: file not found") from None
    except UnidentifiedImageError:
        kinds = f"({', '.join(formats)})" if formats is not None else "file Pillow can read"
        raise PhotoError("not-an-image", f"{label}: not an image {kinds}") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise PhotoError(
            "too-large", f"{label}: image has more pixels than the {max_pixels:,}-pixel limit"
        ) from None
    except (OSError, SyntaxError, ValueError, EOFError, MemoryError) as exc:
        raise PhotoError("corrupt", f"{label}: the image is truncated or corrupt ({exc})") from None


def _reduced(img: Image.Image, min_side: int | None) -> Image.Image:
    """``img`` box-reduced by the largest whole factor keeping both sides ≥ ``min_side``."""
    factor = min(img.size) // min_side if min_side else 1
    if factor < 2:
        return img
    try:
        return img.reduce(factor)
    except ValueError:  # a mode reduce() does not take (palette, 1-bit, …)
        return img.convert("RGB").reduce(factor)
