"""Gallery photos: the file itself and its nearest neighbours."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse

from groundsearch.model.runtime.images.photos import EXTENSIONS
from groundsearch.service.deps import PhotosDep, SettingsDep, check_k
from groundsearch.service.problems import responses
from groundsearch.service.routes.params import ImageId, K, MinRelevance
from groundsearch.service.schemas import ImagesResponse, image_hits

router = APIRouter(tags=["images"])
BINARY = {"schema": {"type": "string", "format": "binary"}}
#: The content type a gallery photo is served with, by its file's suffix.
MEDIA_TYPES = {f".{ext}": f"image/{fmt.lower()}" for fmt, ext in EXTENSIONS.items()} | {
    ".jpeg": "image/jpeg",
    ".tiff": "image/tiff",
}
OTHER = "application/octet-stream"
PHOTO_TYPES = sorted({*MEDIA_TYPES.values(), OTHER})


@router.get(
    "/images/{image_id}",
    response_class=FileResponse,
    responses={
        200: {"description": "The photo.", "content": {t: BINARY for t in PHOTO_TYPES}},
        **responses(404, 422, 503),
    },
)
async def photo(photos: PhotosDep, image_id: ImageId) -> FileResponse:
    """The gallery photo's bytes."""
    path = photos.path(image_id)
    content_type = MEDIA_TYPES.get(path.suffix.lower(), OTHER)
    return FileResponse(path, media_type=content_type, headers={"Cache-Control": "max-age=3600"})


@router.get(
    "/images/{image_id}/similar",
    response_model=ImagesResponse,
    responses=responses(404, 422, 503),
)
async def similar(
    photos: PhotosDep,
    settings: SettingsDep,
    image_id: ImageId,
    k: K = 10,
    min_relevance: MinRelevance = None,
) -> ImagesResponse:
    """The ``k`` gallery photos closest to this one (itself excluded): those whose
    relevance reaches ``min_relevance`` in ``results``, the others in ``weak``."""
    check_k(k, settings)
    hits, relevance = await run_in_threadpool(photos.similar, image_id, k)
    return ImagesResponse(**image_hits(hits, relevance, photos.judge.threshold(min_relevance)))
