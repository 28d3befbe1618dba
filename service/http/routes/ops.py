"""Liveness, readiness, metrics and the web page."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response

from groundsearch.service.http.problems import ServiceError, responses
from groundsearch.service.http.schemas import Health, Readiness

router = APIRouter(tags=["operations"])
STATIC = Path(__file__).resolve().parent.parent / "static"


@router.get("/health", response_model=Health)
async def health() -> Health:
    """The process answers (the model may still be loading: see ``/ready``)."""
    return Health(status="ok")


@router.get("/ready", response_model=Readiness, responses=responses(503))
async def ready(request: Request) -> Readiness:
    """Model and gallery loaded, with the gallery's item counts (503 until then)."""
    capabilities = request.app.state.capabilities
    if capabilities is None:
        error = request.app.state.load_error
        detail = f"failed to load: {error}" if error else "the model is still loading"
        raise ServiceError(503, detail, "not-ready", {"Retry-After": "5"})
    return Readiness(**capabilities.status.readiness())


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"description": "Prometheus text format.", "content": {"text/plain": {}}}},
)
async def metrics(request: Request) -> Response:
    """Prometheus text format: latency per route and stage, refusals and queue depths per
    kind of work, gallery sizes."""
    m = request.app.state.metrics
    capabilities = request.app.state.capabilities
    if capabilities is not None:
        for store, n in capabilities.status.counts().items():
            m.items.labels(store).set(n)
    return Response(m.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    """The web page: search, describe, arithmetic and the query's tree."""
    index = STATIC / "index.html"
    if not index.is_file():
        raise ServiceError(404, "the web page is not installed")
    return FileResponse(index, media_type="text/html")
