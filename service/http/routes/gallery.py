"""Gallery writes: add an uploaded photo (with captions) or remove one. Token required."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.concurrency import run_in_threadpool

from groundsearch.service.http.admission import declare_work
from groundsearch.service.http.deps import (
    AdmissionDep,
    GalleryWritesDep,
    PhotoWorkersDep,
    SettingsDep,
    WriteTokenDep,
    read_upload,
)
from groundsearch.service.http.problems import ServiceError, responses
from groundsearch.service.http.routes.params import ImageId
from groundsearch.service.http.schemas import AddedPhoto, RemovedPhoto
from groundsearch.service.http.uploads import read_photo

router = APIRouter(prefix="/gallery", tags=["gallery"])


@router.post(
    "/images",
    status_code=201,
    response_model=AddedPhoto,
    responses=responses(400, 401, 403, 404, 413, 415, 422, 429, 503),
    # the CNN; a parse slot too when it has captions (in the body: taken once read)
    openapi_extra=declare_work(cnn=(), parse=("captions",), upload=True),
)
async def add_photo(
    _: WriteTokenDep,
    writes: GalleryWritesDep,
    settings: SettingsDep,
    request: Request,
    admission: AdmissionDep,
    workers: PhotoWorkersDep,
    image: Annotated[
        UploadFile,
        File(
            description="The photo to add; what its file says (EXIF date, camera, GPS, "
            "size) and its file name are kept."
        ),
    ],
    captions: Annotated[list[str], Form(description="Captions of the photo.")] = [],  # noqa: B006
) -> AddedPhoto:
    """Embed an uploaded photo (and its captions) into the gallery, persisted at once,
    with what its file says (EXIF date, camera, GPS place, pixel size; the name it was
    uploaded with). Blank captions are left out; a caption with no word the model knows
    is refused (404)."""
    if len(captions) > settings.max_captions:
        raise ServiceError(422, f"at most {settings.max_captions} captions per photo")
    captions = [c for c in captions if c.strip()]
    data = await read_upload(image, settings)
    async with admission.slots_for(request, captions=captions):
        photo, fmt = await workers.run(
            read_photo, data, settings.max_pixels, writes.photos.min_side
        )
        image_id, caption_ids, new = await workers.run(
            writes.add, data, fmt, photo, captions, image.filename
        )
    return AddedPhoto(id=image_id, url=f"/images/{image_id}", captions=caption_ids, new=new)


@router.delete(
    "/images/{image_id}", response_model=RemovedPhoto, responses=responses(401, 403, 404, 422, 503)
)
async def remove_photo(
    _: WriteTokenDep, writes: GalleryWritesDep, image_id: ImageId
) -> RemovedPhoto:
    """Remove a photo and its captions from the gallery."""
    removed = await run_in_threadpool(writes.remove, image_id)
    return RemovedPhoto(id=image_id, removed_captions=removed)
