"""Text → images, photo → captions (found and written), embedding arithmetic, paraphrase
and the query's tree.

Each route holds an admission slot (``service.admission``) for the work it does: ``parse``
for sentences (a cached query needs none), ``cnn`` for decoding a photo and running the
backbone (on the niced ``PhotoWorkers`` threads); a full waiting line is answered 429 at
once.
"""

from __future__ import annotations

from functools import partial
from typing import Annotated, Literal

from fastapi import APIRouter, File, Query, UploadFile
from fastapi.concurrency import run_in_threadpool

from groundsearch.model.runtime.captioning import Generated
from groundsearch.service.deps import (
    AdmissionDep,
    EngineDep,
    PhotoWorkersDep,
    SettingsDep,
    check_k,
    read_upload,
)
from groundsearch.service.engine import Engine, ImageHits, Timings
from groundsearch.service.problems import responses
from groundsearch.service.routes.params import MAX_ID, Beam, K, Minus, Plus, Rerank, Text
from groundsearch.service.schemas import (
    CaptionHit,
    DescribeResponse,
    ExplainResponse,
    ImageHit,
    ImagesResponse,
    ParaphraseResponse,
    SearchResponse,
    WrittenSentence,
)
from groundsearch.service.uploads import read_photo

router = APIRouter(tags=["search"])
TEXT_ERRORS = responses(404, 422, 429, 503)
#: Routes that can write sentences: 501 without a caption decoder.
WRITING_ERRORS = responses(404, 422, 429, 501, 503)
PHOTO_STATUSES = (400, 413, 415, 422, 429, 501, 503)
PHOTO_ERRORS = responses(*PHOTO_STATUSES)
Photo = Annotated[UploadFile, File(description="A photo (JPEG, PNG, GIF, WebP, BMP, TIFF).")]
Sentences = Annotated[
    Literal["both", "generated", "retrieved"],
    Query(
        description="'generated': sentences the caption decoder writes; 'retrieved': existing "
        "captions; 'both' (written ones only when the server has a decoder)."
    ),
]
Sentence = Annotated[
    bool, Query(description="Also write a sentence for the result vector (caption decoder).")
]


def _needs_decoder(engine: Engine, asked: bool) -> None:
    """Refuse (501) before any work when written sentences are asked for and none can be."""
    if asked:
        engine.require_decoder()


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
    sentences: Sentences = "both",
    beam: Beam = None,
) -> DescribeResponse:
    """Sentences for a photo: new ones the caption decoder writes (Kiros et al. 2014) and
    the ``k`` existing captions (the gallery's and the caption bank's) that fit it best."""
    check_k(k, settings)
    _needs_decoder(engine, sentences == "generated")
    written = sentences == "generated" or (sentences == "both" and engine.decoder is not None)
    retrieved = sentences != "generated"
    data = await read_upload(image, settings)
    async with admission.slots("cnn"):
        photo, _ = await workers.run(read_photo, data, settings.max_pixels, engine.min_side)
        hits, wrote, timings = await workers.run(
            engine.describe, photo, k, retrieved, written, beam
        )
    return DescribeResponse(
        generated=[WrittenSentence.of(g) for g in wrote],
        results=[CaptionHit.of(h) for h in hits],
        timings_ms=timings,
    )


@router.post("/paraphrase", response_model=ParaphraseResponse, responses=WRITING_ERRORS)
async def paraphrase(
    engine: EngineDep, admission: AdmissionDep, text: Text, beam: Beam = None
) -> ParaphraseResponse:
    """Sentences the caption decoder writes for the vector of ``text``: what the joint
    space keeps of a sentence, said again in words."""
    _needs_decoder(engine, True)
    async with admission.slots("parse"):
        wrote, timings = await run_in_threadpool(engine.paraphrase, text, beam)
    return ParaphraseResponse(
        query=text, generated=[WrittenSentence.of(g) for g in wrote], timings_ms=timings
    )


@router.post("/arithmetic", response_model=ImagesResponse, responses=WRITING_ERRORS)
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
    sentence: Sentence = False,
) -> ImagesResponse:
    """Photos near ``photo − Σ minus + Σ plus`` (Kiros et al. 2014), from a gallery photo;
    with ``sentence``, what the result vector says in words."""
    check_k(k, settings)
    _needs_decoder(engine, sentence)
    async with admission.slots(*(("parse",) if plus or minus or sentence else ())):
        hits, wrote, timings = await run_in_threadpool(
            engine.arithmetic, image_id, plus, minus, k, rerank, written=sentence
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
    engine: EngineDep,
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
    _needs_decoder(engine, sentence)
    data = await read_upload(image, settings)
    async with admission.slots("cnn", *(("parse",) if plus or minus else ())):
        photo, _ = await workers.run(read_photo, data, settings.max_pixels, engine.min_side)
        compute = partial(engine.arithmetic, written=sentence)
        hits, wrote, timings = await workers.run(compute, photo, plus, minus, k, rerank)
    return _images(hits, wrote, timings)


@router.get("/explain", response_model=ExplainResponse, responses=TEXT_ERRORS)
async def explain(engine: EngineDep, admission: AdmissionDep, text: Text) -> ExplainResponse:
    """The query's dependency tree and each word's share of its sentence vector."""
    async with admission.slots("parse"):
        tree, shares, timings = await run_in_threadpool(engine.explain, text)
    return ExplainResponse.of(tree, shares, engine.encoder, timings)
