"""Text → images, photo → captions, embedding arithmetic and the query's tree."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, HTTPException, Query, UploadFile
from fastapi.concurrency import run_in_threadpool
from PIL import Image

from groundsearch.service.deps import EngineDep, SettingsDep, check_k, read_upload
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
Text = Annotated[str, Query(description="A sentence, e.g. 'a dog runs on the beach'.")]
MAX_PHRASES = 10


@router.post("/search", response_model=SearchResponse)
async def search(
    engine: EngineDep, settings: SettingsDep, text: Text, k: int = 10
) -> SearchResponse:
    """The ``k`` gallery photos that best match ``text``."""
    check_k(k, settings)
    hits, timings = await run_in_threadpool(engine.search, text, k)
    return SearchResponse(query=text, results=[ImageHit.of(h) for h in hits], timings_ms=timings)


@router.post("/describe", response_model=DescribeResponse)
async def describe(
    engine: EngineDep,
    settings: SettingsDep,
    image: Annotated[UploadFile, File(description="A photo (JPEG, PNG, …).")],
    k: int = 5,
) -> DescribeResponse:
    """The ``k`` gallery captions that best describe an uploaded photo."""
    check_k(k, settings)
    data = await read_upload(image, settings)
    photo, _ = await run_in_threadpool(read_photo, data, settings.max_pixels)
    hits, timings = await run_in_threadpool(engine.describe, photo, k)
    return DescribeResponse(results=[CaptionHit.of(h) for h in hits], timings_ms=timings)


@router.post("/arithmetic", response_model=ImagesResponse)
async def arithmetic(
    engine: EngineDep,
    settings: SettingsDep,
    image_id: Annotated[int | None, Query(description="A gallery photo to start from.")] = None,
    image: Annotated[UploadFile | None, File(description="Or an uploaded photo.")] = None,
    plus: Annotated[list[str], Query(description="Phrases to add, e.g. 'red'.")] = [],  # noqa: B006
    minus: Annotated[list[str], Query(description="Phrases to take away.")] = [],  # noqa: B006
    k: int = 10,
    rerank: Annotated[bool, Query(description="Re-sort by the mean of the top photos.")] = False,
) -> ImagesResponse:
    """Photos near ``image − Σ minus + Σ plus``, as in Kiros et al. (2014)."""
    check_k(k, settings)
    if (image_id is None) == (image is None):
        raise HTTPException(422, "give exactly one of image_id (a gallery photo) or image")
    if len(plus) + len(minus) > MAX_PHRASES:
        raise HTTPException(422, f"at most {MAX_PHRASES} plus and minus phrases")
    base: int | Image.Image
    if image is not None:
        data = await read_upload(image, settings)
        base, _ = await run_in_threadpool(read_photo, data, settings.max_pixels)
    else:
        assert image_id is not None  # exactly one was given
        base = image_id
    hits, timings = await run_in_threadpool(engine.arithmetic, base, plus, minus, k, rerank)
    return ImagesResponse(results=[ImageHit.of(h) for h in hits], timings_ms=timings)


@router.get("/explain", response_model=ExplainResponse)
async def explain(engine: EngineDep, text: Text) -> ExplainResponse:
    """The query's dependency tree and each word's share of its sentence vector."""
    tree, shares, timings = await run_in_threadpool(engine.explain, text)
    return ExplainResponse.of(tree, shares, engine.encoder, timings)
