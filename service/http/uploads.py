"""Uploaded photos: bytes → RGB image, or an ``UploadError`` carrying the HTTP status."""

from __future__ import annotations

from PIL import Image
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from groundsearch.model.runtime.images.photos import EXTENSIONS, PhotoError, decode_photo
from groundsearch.service.http.problems import ServiceError, problem

#: The problem type of each kind of photo problem.
PHOTO_PROBLEMS = {
    "not-an-image": (415, "not-an-image"),
    "unsupported": (415, "unsupported-image-format"),
    "too-large": (413, "image-too-large"),
    "corrupt": (422, "corrupt-image"),
}


class UploadError(ServiceError):
    """An upload the service refuses, with the HTTP status that says why."""


def check_size(data: bytes, max_bytes: int) -> bytes:
    """413 for an upload over ``max_bytes``; 422 for an empty one."""
    if len(data) > max_bytes:
        raise UploadError(413, f"upload is over the {max_bytes:,}-byte limit", "upload-too-large")
    if not data:
        raise UploadError(422, "the uploaded file is empty", "empty-upload")
    return data


def read_photo(data: bytes, max_pixels: int, min_side: int) -> tuple[Image.Image, str]:
    """Decode an upload to RGB, no larger than ``min_side`` needs; UploadError if it fails."""
    try:
        return decode_photo(data, max_pixels, formats=EXTENSIONS, min_side=min_side)
    except PhotoError as exc:
        status, slug = PHOTO_PROBLEMS.get(exc.reason, (422, "corrupt-image"))
        raise UploadError(status, str(exc), slug) from None


class UploadLimitMiddleware:
    """Refuse (413) an upload whose declared Content-Length is over the limit."""

    def __init__(self, app: ASGIApp, paths: set[str], max_bytes: int, slack: int) -> None:
        self.app, self.paths, self.max_bytes, self.slack = app, paths, max_bytes, slack

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.paths:
            length = dict(scope["headers"]).get(b"content-length", b"")
            if length.isdigit() and int(length) > self.max_bytes + self.slack:
                message = f"upload is over the {self.max_bytes:,}-byte limit"
                answer = problem(Request(scope), 413, message, "upload-too-large")
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)
