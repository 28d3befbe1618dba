"""Uploaded photos: bytes → RGB image, or an ``UploadError`` carrying the HTTP status.

Nothing is decoded before the size checks: the byte limit is applied while reading,
the pixel limit on the header (``groundsearch.model.runtime.images.photos``, the one
photo decoder), so a decompression bomb is refused before it allocates anything.
"""

from __future__ import annotations

from PIL import Image
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from groundsearch.model.runtime.images.photos import EXTENSIONS, PhotoError, decode_photo


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


#: The HTTP status of each kind of photo problem.
PHOTO_STATUS = {"not-an-image": 415, "unsupported": 415, "too-large": 413, "corrupt": 422}


def read_photo(data: bytes, max_pixels: int) -> tuple[Image.Image, str]:
    """Decode an upload to RGB (one of ``EXTENSIONS``' formats); UploadError if it fails."""
    try:
        return decode_photo(data, max_pixels, formats=EXTENSIONS)
    except PhotoError as exc:
        raise UploadError(PHOTO_STATUS.get(exc.reason, 422), str(exc)) from None


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
