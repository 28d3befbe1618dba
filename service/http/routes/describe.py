"""Photo → sentences (found and written), and text → sentences written for its vector."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool

from groundsearch.service.http.admission import declare_work
from groundsearch.service.http.deps import (
    AdmissionDep,
    DescribeDep,
    PhotoWorkersDep,
    SettingsDep,
    TextWorkersDep,
    check_k,
    read_upload,
)
from groundsearch.service.http.problems import responses
from groundsearch.service.http.routes.params import (
    PHOTO_STATUSES,
    WRITING_ERRORS,
    Beam,
    ImageId,
    K,
    MinRelevance,
    Photo,
    Text,
)
from groundsearch.service.http.schemas import DescribeResponse, ParaphraseResponse, WrittenSentence
from groundsearch.service.http.uploads import read_photo

if TYPE_CHECKING:
    from groundsearch.service.core.capabilities.describe import Describe

router = APIRouter(tags=["search"])
SentenceChoice = Annotated[
    Literal["both", "generated", "retrieved"],
    Query(
        description="'generated': sentences the caption decoder writes; 'retrieved': existing "
        "captions; 'both' (written ones only when the server has a decoder)."
    ),
]


@router.post(
    "/describe",
    response_model=DescribeResponse,
    responses=responses(*PHOTO_STATUSES),
    openapi_extra=declare_work(cnn=(), upload=True),
)
async def describe(
    capability: DescribeDep,
    settings: SettingsDep,
    request: Request,
    admission: AdmissionDep,
    workers: PhotoWorkersDep,
    image: Photo,
    k: K = 5,
    sentences: SentenceChoice = "both",
    beam: Beam = None,
    min_relevance: MinRelevance = None,
) -> DescribeResponse:
    """Sentences for a photo: new ones the caption decoder writes (Kiros et al. 2014) and
    the ``k`` existing captions (the gallery's and the caption bank's) that fit it best:
    those whose relevance reaches ``min_relevance`` in ``results``, the others in
    ``weak``."""
    check_k(k, settings)
    written, retrieved = _wanted(capability, sentences)
    data = await read_upload(image, settings)
    async with admission.slots_for(request):
        photo, _ = await workers.run(
            read_photo, data, settings.max_pixels, capability.photos.min_side
        )
        found = await workers.run(capability.run, photo, k, retrieved, written, beam)
    return DescribeResponse.of(found, capability.judge.threshold(min_relevance), retrieved)


def _wanted(capability: Describe, sentences: str) -> tuple[bool, bool]:
    """Whether to write sentences and to find captions (501 before any work when only
    written ones are asked for and there is no decoder)."""
    if sentences == "generated":
        capability.captioner.require()
    written = sentences == "generated" or (sentences == "both" and capability.writes)
    return written, sentences != "generated"


@router.get(
    "/images/{image_id}/describe",
    response_model=DescribeResponse,
    responses=responses(404, 422, 429, 501, 503),
    openapi_extra=declare_work(cnn=()),
)
async def describe_gallery_photo(
    capability: DescribeDep,
    settings: SettingsDep,
    request: Request,
    admission: AdmissionDep,
    workers: PhotoWorkersDep,
    image_id: ImageId,
    k: K = 5,
    sentences: SentenceChoice = "both",
    beam: Beam = None,
    min_relevance: MinRelevance = None,
) -> DescribeResponse:
    """What ``POST /describe`` answers for the gallery photo's file: the sentences the
    caption decoder writes for it, the ``k`` existing captions that fit it best (its own
    among them), and what the classifier saw. 404 when the item is gone, or its file is
    gone or can no longer be read."""
    check_k(k, settings)
    written, retrieved = _wanted(capability, sentences)
    await run_in_threadpool(capability.gallery.photo_path, image_id)  # 404 before a slot
    async with admission.slots_for(request):
        photo = await workers.run(capability.gallery_photo, image_id, settings.max_pixels)
        found = await workers.run(capability.run, photo, k, retrieved, written, beam)
    return DescribeResponse.of(found, capability.judge.threshold(min_relevance), retrieved)


@router.post(
    "/paraphrase",
    response_model=ParaphraseResponse,
    responses=WRITING_ERRORS,
    openapi_extra=declare_work(parse=()),
)
async def paraphrase(
    capability: DescribeDep,
    request: Request,
    admission: AdmissionDep,
    workers: TextWorkersDep,
    text: Text,
    beam: Beam = None,
) -> ParaphraseResponse:
    """Sentences the caption decoder writes for the vector of ``text``: what the joint
    space keeps of a sentence, said again in words."""
    capability.captioner.require()  # 501 before any work
    cleaned = capability.clean(text)
    async with admission.slots_for(request):
        wrote, timings = await workers.run(capability.paraphrase, cleaned, beam)
    return ParaphraseResponse(
        query=text, generated=[WrittenSentence.of(g) for g in wrote], timings_ms=timings
    )
