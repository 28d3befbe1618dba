"""Embedding arithmetic (Kiros et al. 2014): photos near ``photo − Σ minus + Σ plus``, from
a gallery photo or an uploaded one (decoded and embedded on the niced ``PhotoWorkers``).
The phrases are cleaned once, by ``Arithmetic.run``, in the order they are read."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from groundsearch.model.runtime.captioning import Generated
from groundsearch.service.capabilities.search import ImageHits
from groundsearch.service.deps import (
    AdmissionDep,
    ArithmeticDep,
    PhotoWorkersDep,
    SettingsDep,
    check_k,
    read_upload,
)
from groundsearch.service.problems import responses
from groundsearch.service.routes.params import (
    MAX_ID,
    PHOTO_STATUSES,
    WRITING_ERRORS,
    K,
    Minus,
    Photo,
    Plus,
    Rerank,
)
from groundsearch.service.schemas import ImageHit, ImagesResponse, WrittenSentence
from groundsearch.service.timing import Timings
from groundsearch.service.uploads import read_photo

router = APIRouter(tags=["search"])
Sentence = Annotated[
    bool, Query(description="Also write a sentence for the result vector (caption decoder).")
]


@router.post("/arithmetic", response_model=ImagesResponse, responses=WRITING_ERRORS)
async def arithmetic(
    capability: ArithmeticDep,
    settings: SettingsDep,
    admission: AdmissionDep,
    image_id: Annotated[
        int, Query(ge=1, le=MAX_ID, description="The gallery photo to start from.")
    ],
    plus: Plus = [],  # noqa: B006
    minus: Minus = [],  # noqa: B006
    k: K = 10,
    rerank: Rerank = False,
    sentence: Sentence = False,
) -> ImagesResponse:
    """Photos near ``photo − Σ minus + Σ plus`` (Kiros et al. 2014), from a gallery photo;
    with ``sentence``, what the result vector says in words."""
    check_k(k, settings)
    if sentence:  # refused (501) before any work when none can be written
        capability.writer.require()
    async with admission.slots(*(("parse",) if plus or minus or sentence else ())):
        hits, wrote, timings = await run_in_threadpool(
            capability.run, image_id, plus, minus, k, rerank, written=sentence
        )
    return _images(hits, wrote, timings)


def _images(hits: ImageHits, wrote: list[Generated], timings: Timings) -> ImagesResponse:
    return ImagesResponse(
        results=[ImageHit.of(h) for h in hits],
        generated=[WrittenSentence.of(g) for g in wrote],
        timings_ms=timings,
    )


@router.post(
    "/arithmetic/upload", response_model=ImagesResponse, responses=responses(404, *PHOTO_STATUSES)
)
async def arithmetic_upload(
    capability: ArithmeticDep,
    settings: SettingsDep,
    admission: AdmissionDep,
    workers: PhotoWorkersDep,
    image: Photo,
    plus: Plus = [],  # noqa: B006
    minus: Minus = [],  # noqa: B006
    k: K = 10,
    rerank: Rerank = False,
    sentence: Sentence = False,
) -> ImagesResponse:
    """Photos near ``photo − Σ minus + Σ plus`` (Kiros et al. 2014), from an uploaded photo;
    with ``sentence``, what the result vector says in words."""
    check_k(k, settings)
    if sentence:
        capability.writer.require()
    data = await read_upload(image, settings)
    async with admission.slots("cnn", *(("parse",) if plus or minus else ())):
        photo, _ = await workers.run(read_photo, data, settings.max_pixels, capability.min_side)
        compute = partial(capability.run, written=sentence)
        hits, wrote, timings = await workers.run(compute, photo, plus, minus, k, rerank)
    return _images(hits, wrote, timings)
