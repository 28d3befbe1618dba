"""Uploaded photos: bytes → RGB image, or an ``UploadError`` carrying the HTTP status.

Nothing is decoded before the size checks: the byte limit is applied while reading,
the pixel limit on the header (Pillow reads width and height without decoding), so a
decompression bomb is refused before it allocates anything.
"""

from __future__ import annotations

import io
import warnings

from PIL import Image, UnidentifiedImageError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

#: Formats an upload may be in, and the extension it is stored under.
EXTENSIONS = {
    "JPEG": "jpg",
    "PNG": "png",
    "GIF": "gif",
    "WEBP": "webp",
    "BMP": "bmp",
    "TIFF": "tif",
}


class UploadError(ValueError):
    """An upload the service refuses, with the HTTP status that says why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def check_size(data: bytes, max_bytes: int) -> bytes:
    """413 for an upload over ``max_bytes``; 422 for an empty one."""
    if len(data) > max_bytes:
        raise UploadError(413, f"upload is over the {max_bytes:,}-byte limit")
    if not data:
        raise UploadError(422, "the uploaded file is empty")
    return data


def decode_photo(data: bytes, max_pixels: int) -> tuple[Image.Image, str]:
    """Decode ``data`` to RGB; returns the image and its format name (e.g. ``JPEG``)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                fmt = img.format or ""
                if fmt not in EXTENSIONS:
                    raise UploadError(415, f"unsupported image format {fmt or 'unknown'}")
                if img.width * img.height > max_pixels:
                    raise UploadError(
                        413,
                        f"image is {img.width}×{img.height} pixels, over the "
                        f"{max_pixels:,}-pixel limit",
                    )
                img.load()
                return img.convert("RGB"), fmt
    except UploadError:
        raise
    except UnidentifiedImageError:
        raise UploadError(
            415, "the upload is not an image (JPEG, PNG, GIF, WebP, BMP, TIFF)"
        ) from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise UploadError(413, f"image has too many pixels ({exc})") from None
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise UploadError(422, f"the image is truncated or corrupt ({exc})") from None


class UploadLimitMiddleware:
    """Refuse (413) an upload whose declared Content-Length is over the limit before its
    body is read. Bodies without a length are cut by ``check_size`` while reading."""

    def __init__(self, app: ASGIApp, paths: set[str], max_bytes: int, slack: int) -> None:
        self.app, self.paths, self.max_bytes, self.slack = app, paths, max_bytes, slack

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.paths:
            length = dict(scope["headers"]).get(b"content-length", b"")
            if length.isdigit() and int(length) > self.max_bytes + self.slack:
                message = f"upload is over the {self.max_bytes:,}-byte limit"
                await JSONResponse({"detail": message}, status_code=413)(scope, receive, send)
                return
        await self.app(scope, receive, send)
