"""Liveness, readiness, metrics and the web page."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from groundsearch.service.schemas import Health, Readiness

router = APIRouter(tags=["operations"])
STATIC = Path(__file__).resolve().parent.parent / "static"


@router.get("/health", response_model=Health)
async def health() -> Health:
    """The process answers (the model may still be loading: see ``/ready``)."""
    return Health(status="ok")


@router.get("/ready", response_model=Readiness, responses={503: {"description": "not ready"}})
async def ready(request: Request) -> Readiness | JSONResponse:
    """Model and gallery loaded, with the gallery's item counts."""
    engine = request.app.state.engine
    if engine is None:
        error = request.app.state.load_error
        detail = f"failed to load: {error}" if error else "the model is still loading"
        return JSONResponse({"ready": False, "detail": detail}, status_code=503)
    counts = engine.counts()
    return Readiness(
        ready=True,
        encoder=engine.encoder,
        checkpoint=engine.identity["checkpoint_sha256"],
        images=counts["images"],
        captions=counts["captions"],
        caption_bank=engine.bank_status,
    )


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Prometheus text format."""
    m = request.app.state.metrics
    engine = request.app.state.engine
    if engine is not None:
        for store, n in engine.counts().items():
            m.items.labels(store).set(n)
    return Response(m.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    """The web page: search, describe, arithmetic and the query's tree."""
    index = STATIC / "index.html"
    if not index.is_file():
        raise HTTPException(404, "the web page is not installed")
    return FileResponse(index, media_type="text/html")
