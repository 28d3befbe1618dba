"""The query's tree: its dependency parse and each word's share of its vector."""

from __future__ import annotations

from fastapi import APIRouter, Request

from groundsearch.service.http.admission import declare_work
from groundsearch.service.http.deps import AdmissionDep, ExplainDep, TextWorkersDep
from groundsearch.service.http.routes.params import TEXT_ERRORS, Text
from groundsearch.service.http.schemas import ExplainResponse

router = APIRouter(tags=["search"])


@router.get(
    "/explain",
    response_model=ExplainResponse,
    responses=TEXT_ERRORS,
    openapi_extra=declare_work(parse=()),
)
async def explain(
    capability: ExplainDep,
    request: Request,
    admission: AdmissionDep,
    workers: TextWorkersDep,
    text: Text,
) -> ExplainResponse:
    """The query's dependency tree and each word's share of its sentence vector."""
    cleaned = capability.clean(text)
    async with admission.slots_for(request):
        tree, shares, timings = await workers.run(capability.run, cleaned)
    return ExplainResponse.of(tree, shares, capability.encoder, timings)
