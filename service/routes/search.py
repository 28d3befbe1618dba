"""Text → images. The query is cleaned once, here: a cached query takes no parse slot
(``service.admission``); a full waiting line is answered 429 at once."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool

from groundsearch.service.deps import AdmissionDep, SearchDep, SettingsDep, check_k
from groundsearch.service.routes.params import TEXT_ERRORS, K, MinRelevance, Text
from groundsearch.service.schemas import SearchResponse, image_hits

router = APIRouter(tags=["search"])


@router.post("/search", response_model=SearchResponse, responses=TEXT_ERRORS)
async def search(
    capability: SearchDep,
    settings: SettingsDep,
    admission: AdmissionDep,
    text: Text,
    k: K = 10,
    min_relevance: MinRelevance = None,
) -> SearchResponse:
    """The ``k`` gallery photos that best match ``text``: those whose relevance reaches
    ``min_relevance`` in ``results``, the others in ``weak``."""
    check_k(k, settings)
    cleaned = capability.clean(text)
    async with admission.slots(*(() if capability.is_cached(cleaned) else ("parse",))):
        hits, relevance, timings = await run_in_threadpool(capability.run, cleaned, k)
    threshold = capability.judge.threshold(min_relevance)
    return SearchResponse(query=text, **image_hits(hits, relevance, threshold), timings_ms=timings)
