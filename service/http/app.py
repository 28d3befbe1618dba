"""The FastAPI application (``create_app``). Without components it loads them in a thread
at startup: ``/health`` answers at once, the other routes 503 until loaded."""

from __future__ import annotations

import gc
import logging
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from groundsearch.index.errors import StoreError, UnknownItemError
from groundsearch.index.filters.conditions import FilterError
from groundsearch.index.ranking.pages import CursorError
from groundsearch.model.runtime.parsing.pool import stop_all
from groundsearch.model.runtime.sentences import UnusableText
from groundsearch.service.core.components import Capabilities, Components
from groundsearch.service.core.memory import return_freed_memory
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.core.work_threads import NICENESS, TEXT_PREFIX, WorkThreads
from groundsearch.service.core.writing import NoDecoder
from groundsearch.service.http import openapi, problems
from groundsearch.service.http.admission import Admission, EarlyRefusal, Gate, declared_work
from groundsearch.service.http.metrics import Metrics, MetricsMiddleware
from groundsearch.service.http.problems import problem
from groundsearch.service.http.routes import (
    arithmetic,
    describe,
    explain,
    filters,
    gallery,
    images,
    ops,
    search,
)
from groundsearch.service.http.routes.ops import STATIC
from groundsearch.service.http.uploads import UploadLimitMiddleware

log = logging.getLogger("groundsearch.service")
#: Swagger UI, from a PyPI package (FastAPI's defaults load them from a CDN).
DOCS_ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
#: Room for the multipart envelope around the file.
MULTIPART_SLACK = 64 * 1024
SWITCH_INTERVAL_S = 0.001
#: Threads that make thumbnails (niced, as the photo workers).
THUMBNAIL_THREADS = 2
#: Text threads beyond the parse slots (niced too): a cached query's search takes no
#: slot, and over shards it waits on the network.
CACHED_TEXT_THREADS = 8
#: Typical seconds one request holds a slot of each kind (for ``Retry-After``).
SECONDS_PER_REQUEST = {"parse": 0.03, "cnn": 0.15}
#: How an unusable text is answered, by why: (status, problem type).
UNUSABLE_TEXT = {
    "too-long": (422, "invalid-text"),
    "unparsable": (422, "invalid-text"),
    "no-words": (404, "unusable-text"),
    "unknown-words": (404, "unusable-text"),
}


def _invalid_parameter(request: Request, parameter: str, detail: str) -> JSONResponse:
    """A 422 naming one query parameter, shaped as FastAPI's own validation problems."""
    errors = [{"loc": ["query", parameter], "msg": detail, "type": "value_error"}]
    return problem(request, 422, f"invalid request: {parameter}: {detail}", errors=errors)


def create_app(
    settings: ServiceSettings | None = None, components: Components | None = None
) -> FastAPI:
    """A groundsearch app over ``settings`` (default: from the environment)."""
    settings = settings or ServiceSettings()
    metrics = Metrics()
    return_freed_memory()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loader = None
        if app.state.components is None:
            # a daemon: a stop while it loads does not wait for it
            loader = threading.Thread(target=_load, args=(app,), name="load", daemon=True)
            loader.start()
        yield
        if loader is None:
            return
        if loader.is_alive():  # stopped while warming up: the parser processes end now
            app.state.stopping = True
            stop_all(final=app.state.ends_process)
        elif app.state.components is not None:  # what this app loaded, not lent ones
            app.state.components.close()

    def _load(app: FastAPI) -> None:
        try:
            # parse threads and processes niced, as the work threads: the event loop first
            components = Components.load(settings, observe=metrics.observe_stage, niceness=NICENESS)
            app.state.components = components
            app.state.capabilities = Capabilities.over(components)
            gc.freeze()  # kept for life: a full collection does not scan the model
            # the event loop waits for the GIL at most this long (default 5 ms)
            sys.setswitchinterval(SWITCH_INTERVAL_S)
            log.info("ready: %s", components.gallery.counts())
        except Exception as exc:  # reported by /ready, logged with its traceback
            if app.state.stopping:  # the stop cut the loading short: nothing to report
                return
            app.state.load_error = str(exc) or type(exc).__name__
            log.exception("could not load the model or the gallery")

    app = FastAPI(
        title="groundsearch",
        summary="Find images from sentences and describe images with sentences (SDT-RNN).",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,  # served below from local files: nothing is fetched from a CDN
        redoc_url=None,  # ReDoc's bundle fetches its logo from a CDN
    )
    app.state.settings, app.state.metrics = settings, metrics
    app.state.components, app.state.load_error = components, None
    #: stopping: stopped while loading; ends_process: the process ends with the app (serve)
    app.state.stopping = app.state.ends_process = False
    app.state.capabilities = Capabilities.over(components) if components is not None else None
    app.state.photo_workers = WorkThreads(settings.cnn_concurrency)
    app.state.thumbnail_workers = WorkThreads(THUMBNAIL_THREADS)  # beside the CNN work
    text_threads = settings.parse_concurrency + CACHED_TEXT_THREADS  # parse, encode, search
    app.state.text_workers = WorkThreads(text_threads, TEXT_PREFIX)
    app.state.admission = Admission(
        [
            Gate(kind, concurrency, queue, SECONDS_PER_REQUEST[kind], metrics.observe_gate)
            for kind, concurrency, queue in (
                ("parse", settings.parse_concurrency, settings.parse_queue),
                ("cnn", settings.cnn_concurrency, settings.cnn_queue),
            )
        ]
    )
    if components is not None:  # their stage timings go to this app's metrics
        components.stages.observe = metrics.observe_stage

    problems.install(app)

    @app.exception_handler(UnusableText)
    async def _unusable(request: Request, exc: UnusableText) -> JSONResponse:
        status, slug = UNUSABLE_TEXT[exc.reason]
        return problem(request, status, str(exc), slug)

    @app.exception_handler(FilterError)
    async def _bad_filter(request: Request, exc: FilterError) -> JSONResponse:
        return _invalid_parameter(request, exc.parameter, str(exc))

    @app.exception_handler(CursorError)
    async def _bad_cursor(request: Request, exc: CursorError) -> JSONResponse:
        return _invalid_parameter(request, "cursor", str(exc))

    @app.exception_handler(NoDecoder)
    async def _no_decoder(request: Request, exc: NoDecoder) -> JSONResponse:
        return problem(request, 501, str(exc), "no-decoder")

    @app.exception_handler(UnknownItemError)
    async def _unknown(request: Request, exc: UnknownItemError) -> JSONResponse:
        return problem(request, 404, str(exc), "unknown-image")

    @app.exception_handler(StoreError)
    async def _store_error(request: Request, exc: StoreError) -> JSONResponse:
        log.error("gallery store error: %s", exc)
        detail = f"the gallery could not be read or written: {exc}"
        return problem(request, 503, detail, "store-unavailable", {"Retry-After": "5"})

    for module in (search, filters, describe, arithmetic, explain, images, gallery, ops):
        app.include_router(module.router)
    work = declared_work(app.routes)  # each route's kinds of work and uploads, as declared
    app.add_middleware(
        UploadLimitMiddleware,
        paths={str(w.route.path) for w in work if w.upload},
        max_bytes=settings.max_upload_bytes,
        slack=MULTIPART_SLACK,
    )
    app.add_middleware(EarlyRefusal, admission=app.state.admission, work=work)
    app.add_middleware(MetricsMiddleware, metrics=metrics)  # outermost: times everything
    openapi.install(app, settings)
    app.mount("/docs-static", StaticFiles(directory=DOCS_ASSETS), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title="groundsearch — API",
            swagger_js_url="/docs-static/swagger-ui-bundle.js",
            swagger_css_url="/docs-static/swagger-ui.css",
            swagger_favicon_url="/docs-static/favicon.png",
        )

    if STATIC.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
