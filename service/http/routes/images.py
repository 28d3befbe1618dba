"""Gallery photos: the library by date, the file (upright), a thumbnail, its neighbours."""

from __future__ import annotations

import hashlib
from email.utils import formatdate
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, Response

from groundsearch.index.ranking.photo_pages import PageAsk
from groundsearch.model.runtime.images.photos import (
    MEDIA_TYPES,
    PHOTO_FORMATS,
    UPRIGHT_JPEG_QUALITY,
)
from groundsearch.service.http.deps import (
    LibraryDep,
    PhotosDep,
    SettingsDep,
    ThumbnailWorkersDep,
    check_k,
)
from groundsearch.service.http.problems import responses
from groundsearch.service.http.routes.filters import CursorParam, Filters, PagingDep
from groundsearch.service.http.routes.params import ImageId, K, MinRelevance
from groundsearch.service.http.schemas import (
    GalleryPhoto,
    ImagesResponse,
    LibraryResponse,
    page_hits,
)

router = APIRouter(tags=["images"])
BINARY = {"schema": {"type": "string", "format": "binary"}}
OTHER = "application/octet-stream"
PHOTO_TYPES = sorted({*MEDIA_TYPES.values(), OTHER})
#: How long a client may keep a served photo.
CACHE_CONTROL = "max-age=3600"
#: How long a client may keep a thumbnail (then it asks again with its ETag).
THUMBNAIL_CACHE_CONTROL = "max-age=86400"
#: The default longer side of a thumbnail, and the range a request may ask for.
THUMBNAIL_SIZE, MIN_THUMBNAIL, MAX_THUMBNAIL = 256, 16, 2048

LibraryOrder = Annotated[
    Literal["-date", "date"],
    Query(
        description="'-date' (default): newest first; 'date': oldest first. Photos taken in "
        "the same second follow by id in the same direction; photos without a date come "
        "last."
    ),
]
ThumbnailSize = Annotated[
    int,
    Query(
        ge=MIN_THUMBNAIL,
        le=MAX_THUMBNAIL,
        description="The thumbnail's longer side in pixels (a smaller photo is not enlarged).",
    ),
]


@router.get("/images", response_model=LibraryResponse, responses=responses(422, 503))
async def library(
    capability: LibraryDep,
    settings: SettingsDep,
    where: Filters,
    order: LibraryOrder = "-date",
    cursor: CursorParam = None,
    k: K = 50,
) -> LibraryResponse:
    """The gallery's photos that pass the filters, by when they were taken (no text, no
    relevance), ``k`` a page: the next page is asked for with ``cursor`` (this one's
    ``next``)."""
    check_k(k, settings)
    page = await run_in_threadpool(capability.page, PageAsk(k, where, order, cursor))
    photos = [GalleryPhoto.of(p) for p in page.photos]
    return LibraryResponse(results=photos, order=order, next=page.next, total=page.total)


@router.get(
    "/images/{image_id}",
    response_class=FileResponse,
    responses={
        200: {
            "description": "The photo, upright: its file as stored, or, when the file's EXIF "
            "orientation says it is stored turned or mirrored, the photo turned upright and "
            f"re-encoded in the same format (JPEG at quality {UPRIGHT_JPEG_QUALITY}) without the "
            "orientation tag. A HEIC/HEIF or AVIF is sent as stored (its turn is in its "
            "container), except that a HEIC/HEIF goes as an upright JPEG to a client whose "
            "Accept header names neither image/heic nor image/heif (browsers other than "
            "Safari), unless it asks for nothing in particular (no header, or */*).",
            "content": {t: BINARY for t in PHOTO_TYPES},
        },
        **responses(404, 422, 503),
    },
)
async def photo(photos: PhotosDep, image_id: ImageId, request: Request) -> Response:
    """The gallery photo, upright: the file's bytes, or the photo turned as its EXIF
    orientation says and re-encoded in its own format; a HEIC as a JPEG for a client
    whose ``Accept`` does not take HEIC (a browser other than Safari)."""
    takes = takes_heif(request.headers.get("accept"))
    served = await run_in_threadpool(photos.served, image_id, takes)
    headers = {"Cache-Control": CACHE_CONTROL}
    if served.negotiated:
        headers["Vary"] = "Accept"
    content_type = MEDIA_TYPES.get(served.path.suffix.lower(), OTHER)
    if served.upright is None:
        return FileResponse(
            served.path, media_type=content_type, headers=headers, stat_result=served.stat
        )
    if served.format in PHOTO_FORMATS:
        content_type = PHOTO_FORMATS[served.format].media_type
    stat = served.stat
    # validators of the file, marked: another representation than the file's bytes
    kind = "jpeg" if served.negotiated and served.format == "JPEG" else "upright"
    tag = hashlib.md5(f"{stat.st_mtime}-{stat.st_size}-{kind}".encode(), usedforsecurity=False)
    headers |= {
        "ETag": f'"{tag.hexdigest()}"',
        "Last-Modified": formatdate(stat.st_mtime, usegmt=True),
    }
    return Response(served.upright, media_type=content_type, headers=headers)


def takes_heif(accept: str | None) -> bool:
    """Whether a client with this ``Accept`` header takes a HEIF: it names ``image/heic``
    or ``image/heif`` (Safari), or asks for nothing in particular (none, or ``*/*``)."""
    if accept is None:
        return True
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")} - {""}
    return not kinds or kinds == {"*/*"} or bool(kinds & {"image/heic", "image/heif"})


@router.get(
    "/images/{image_id}/similar", response_model=ImagesResponse, responses=responses(404, 422, 503)
)
async def similar(
    photos: PhotosDep,
    settings: SettingsDep,
    image_id: ImageId,
    where: Filters,
    paging: PagingDep,
    k: K = 10,
    min_relevance: MinRelevance = None,
) -> ImagesResponse:
    """The gallery photos closest to this one (itself excluded) among those that pass the
    filters, ``k`` a page, ordered and paged as ``/search``'s."""
    check_k(k, settings)
    threshold = photos.judge.threshold(min_relevance)
    ask = PageAsk(k, where, paging.order, paging.cursor)
    page = await run_in_threadpool(photos.similar, image_id, ask, threshold)
    return ImagesResponse(order=paging.order, **page_hits(page, threshold))


@router.get(
    "/images/{image_id}/thumbnail",
    response_class=Response,
    responses={
        200: {
            "description": "The photo as a JPEG, upright, its longer side at most 'size' "
            "pixels, with an ETag and Cache-Control.",
            "content": {"image/jpeg": BINARY},
        },
        304: {"description": "Not modified: the client's copy (If-None-Match) is current."},
        **responses(404, 422, 503),
    },
)
async def thumbnail(
    photos: PhotosDep,
    workers: ThumbnailWorkersDep,
    request: Request,
    image_id: ImageId,
    size: ThumbnailSize = THUMBNAIL_SIZE,
) -> Response:
    """A small JPEG of the gallery photo for grids: made once and kept in memory;
    ``If-None-Match`` with its ETag answers 304."""
    known = {t.strip() for t in request.headers.get("if-none-match", "").split(",") if t.strip()}
    made, new = await workers.run(photos.thumbnail, image_id, size, known)
    headers = {
        "ETag": made.etag,
        "Cache-Control": THUMBNAIL_CACHE_CONTROL,
        "Last-Modified": formatdate(made.mtime, usegmt=True),
    }
    if not new:
        return Response(status_code=304, headers=headers)
    return Response(made.data, media_type="image/jpeg", headers=headers)
