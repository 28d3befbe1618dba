"""Text → images, photo → captions, embedding arithmetic and the query's tree.

Each route holds an admission slot (``service.admission``) for the work it does: ``parse``
for sentences (a cached query needs none), ``cnn`` for decoding a photo and running the
backbone (on the niced ``PhotoWorkers`` threads); a full waiting line is answered 429 at
once.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Query, UploadFile
from fastapi.concurrency import run_in_threadpool

from groundsearch.service.deps import (
    AdmissionDep,
    EngineDep,
    PhotoWorkersDep,
    SettingsDep,
    check_k,
    read_upload,
)
from groundsearch.service.problems import responses
from groundsearch.service.routes.params import MAX_ID, K, Minus, Plus, Rerank, Text
from groundsearch.service.schemas import (
    CaptionHit,
    DescribeResponse,
    ExplainResponse,
    ImageHit,
    ImagesResponse,
    SearchResponse,
)
from groundsearch.service.uploads import read_photo

router = APIRouter(tags=["search"])
TEXT_ERRORS = responses(404, 422, 429, 503)
PHOTO_STATUSES = (400, 413, 415, 422, 429, 503)
PHOTO_ERRORS = responses(*PHOTO_STATUSES)
Photo = Annotated[UploadFile, File(description="A photo (JPEG, PNG, GIF, WebP, BMP, TIFF).")]


@router.post("/search", response_model=SearchResponse, responses=TEXT_ERRORS)
async def search(
    engine: EngineDep, settings: SettingsDep, admission: AdmissionDep, text: Text, k: K = 10
) -> SearchResponse:
    """The ``k`` gallery photos that best match ``text``."""
    check_k(k, settings)
    async with admission.slots(*(() if engine.is_cached(text) else ("parse",))):
        hits, timings = await run_in_threadpool(engine.search, text, k)
    return SearchResponse(query=text, results=[ImageHit.of(h) for h in hits], timings_ms=timings)


@router.post("/describe", response_model=DescribeResponse, responses=PHOTO_ERRORS)
async def describe(
    engine: EngineDep,
    settings: SettingsDep,
    admission: AdmissionDep,
    workers: PhotoWorkersDep,
    image: Photo,
    k: K = 5,
) -> DescribeResponse:
    """The ``k`` captions (the gallery's and the caption bank's) that best describe a photo."""
    check_k(k, settings)
    data = await read_upload(image, settings)
    async with admission.slots("cnn"):
        photo, _ = await workers.run(read_photo, data, settings.max_pixels, engine.min_side)
        hits, timings = await workers.run(engine.describe, photo, k)
    return DescribeResponse(results=[CaptionHit.of(h) for h in hits], timings_ms=timings)


@router.post("/arithmetic", response_model=ImagesResponse, responses=TEXT_ERRORS)
async def arithmetic(
    engine: EngineDep,
    settings: SettingsDep,
    admission: AdmissionDep,
    image_id: Annotated[
        int, Query(ge=1, le=MAX_ID, description="The gallery photo to start from.")
    ],
    plus: Plus = [],  # noqa: B006
    minus: Minus = [],  # noqa: B006
    k: K = 10,
    rerank: Rerank = False,
) -> ImagesResponse:
    """Photos near ``photo − Σ minus + Σ plus`` (Kiros et al. 2014), from a gallery photo."""
    check_k(k, settings)
    async with admission.slots(*(("parse",) if plus or minus else ())):
        hits, timings = await run_in_threadpool(engine.arithmetic, image_id, plus, minus, k, rerank)
    return ImagesResponse(results=[ImageHit.of(h) for h in hits], timings_ms=timings)


@router.post(
    "/arithmetic/upload", response_model=ImagesResponse, responses=responses(404, *PHOTO_STATUSES)
)
async def arithmetic_upload(
    engine: EngineDep,
    settings: SettingsDep,
    admission: AdmissionDep,
    workers: PhotoWorkersDep,
    image: Photo,
    plus: Plus = [],  # noqa: B006
    minus: Minus = [],  # noqa: B006
    k: K = 10,
    rerank: Rerank = False,
) -> ImagesResponse:
    """Photos near ``photo − Σ minus + Σ plus`` (Kiros et al. 2014), from an uploaded photo."""
    check_k(k, settings)
    data = await read_upload(image, settings)
    async with admission.slots("cnn", *(("parse",) if plus or minus else ())):
        photo, _ = await workers.run(read_photo, data, settings.max_pixels, engine.min_side)
        hits, timings = await workers.run(engine.arithmetic, photo, plus, minus, k, rerank)
    return ImagesResponse(results=[ImageHit.of(h) for h in hits], timings_ms=timings)


@router.get("/explain", response_model=ExplainResponse, responses=TEXT_ERRORS)
async def explain(engine: EngineDep, admission: AdmissionDep, text: Text) -> ExplainResponse:
    """The query's dependency tree and each word's share of its sentence vector."""
    async with admission.slots("parse"):
        tree, shares, timings = await run_in_threadpool(engine.explain, text)
    return ExplainResponse.of(tree, shares, engine.encoder, timings)
