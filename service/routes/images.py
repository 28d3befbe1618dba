"""Gallery photos: the file itself and its nearest neighbours."""

from __future__ import annotations

import mimetypes

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse

from groundsearch.service.deps import EngineDep, SettingsDep, check_k
from groundsearch.service.schemas import ImageHit, ImagesResponse

router = APIRouter(tags=["images"])


@router.get("/images/{image_id}", response_class=FileResponse)
async def photo(engine: EngineDep, image_id: int) -> FileResponse:
    """The gallery photo's bytes."""
    path = engine.photo_path(image_id)
    content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return FileResponse(path, media_type=content_type, headers={"Cache-Control": "max-age=3600"})


@router.get("/images/{image_id}/similar", response_model=ImagesResponse)
async def similar(
    engine: EngineDep, settings: SettingsDep, image_id: int, k: int = 10
) -> ImagesResponse:
    """The ``k`` gallery photos closest to this one (itself excluded)."""
    check_k(k, settings)
    hits = await run_in_threadpool(engine.similar, image_id, k)
    return ImagesResponse(results=[ImageHit.of(h) for h in hits])
