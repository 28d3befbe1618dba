"""Text → images, and a photo (with a text) → images; the query is cleaned once, here."""

from __future__ import annotations

import hashlib
from typing import Annotated

from fastapi import APIRouter, Query, Request

from groundsearch.index.ranking.photo_pages import PageAsk
from groundsearch.service.http.admission import declare_work
from groundsearch.service.http.deps import (
    AdmissionDep,
    PhotoSearchDep,
    PhotoWorkersDep,
    SearchDep,
    SettingsDep,
    TextWorkersDep,
    check_k,
    read_upload,
)
from groundsearch.service.http.problems import responses
from groundsearch.service.http.routes.filters import Filters, PagingDep
from groundsearch.service.http.routes.params import (
    PHOTO_STATUSES,
    TEXT_ERRORS,
    K,
    MinRelevance,
    Photo,
    Text,
)
from groundsearch.service.http.schemas import SearchResponse, page_hits
from groundsearch.service.http.uploads import read_photo

router = APIRouter(tags=["search"])


@router.post(
    "/search",
    response_model=SearchResponse,
    responses=TEXT_ERRORS,
    openapi_extra=declare_work(parse=(), cached_by="text"),
)
async def search(
    capability: SearchDep,
    settings: SettingsDep,
    request: Request,
    admission: AdmissionDep,
    workers: TextWorkersDep,
    text: Text,
    where: Filters,
    paging: PagingDep,
    k: K = 10,
    min_relevance: MinRelevance = None,
) -> SearchResponse:
    """The gallery photos that best match ``text`` among those that pass the filters, ``k``
    a page: in relevance order, those whose relevance reaches ``min_relevance`` in
    ``results`` and the others in ``weak``; in date order, only those that reach it. The
    next page is asked for with ``cursor`` (the ``next`` of this one)."""
    check_k(k, settings)
    cleaned = capability.clean(text)
    ask = PageAsk(k, where, paging.order, paging.cursor)
    async with admission.slots_for(request, cached=capability.is_cached(cleaned)):
        page, timings, threshold = await workers.run(capability.run, cleaned, ask, min_relevance)
    return SearchResponse(
        query=text, order=paging.order, **page_hits(page, threshold), timings_ms=timings
    )


SteerText = Annotated[
    str | None,
    Query(
        description="Optional: a phrase that steers the search ('at night', 'in the snow'): "
        "the query becomes the photo's vector plus the text's (as /arithmetic adds a "
        "phrase), and relevance is read as for arithmetic hits."
    ),
]


@router.post(
    "/search/image",
    response_model=SearchResponse,
    responses=responses(404, *PHOTO_STATUSES),
    openapi_extra=declare_work(cnn=(), parse=("text",), upload=True),
)
async def search_image(
    capability: PhotoSearchDep,
    settings: SettingsDep,
    request: Request,
    admission: AdmissionDep,
    workers: PhotoWorkersDep,
    image: Photo,
    where: Filters,
    paging: PagingDep,
    text: SteerText = None,
    k: K = 10,
    min_relevance: MinRelevance = None,
) -> SearchResponse:
    """The gallery photos most like an uploaded photo (optionally steered by ``text``)
    among those that pass the filters, paged and ordered as ``/search``'s."""
    check_k(k, settings)
    cleaned = None if text is None else capability.queries.clean(text)
    data = await read_upload(image, settings)
    threshold = capability.judge.threshold(min_relevance)
    ask = PageAsk(k, where, paging.order, paging.cursor)
    identity = hashlib.sha256(data).hexdigest()
    cached = cleaned is not None and capability.queries.is_cached(cleaned)
    async with admission.slots_for(request, cached=cached, text=cleaned):
        photo, _ = await workers.run(
            read_photo, data, settings.max_pixels, capability.photos.min_side
        )
        page, timings = await workers.run(capability.run, photo, identity, cleaned, ask, threshold)
    return SearchResponse(
        query=text or "", order=paging.order, **page_hits(page, threshold), timings_ms=timings
    )
