"""Typed dependencies of the routes: each route's capability, settings, admission, the
photo workers, limits, the writer check.

They are ``async``: FastAPI runs a plain ``def`` dependency in the thread pool, a hop that
waits behind the model work under load; these only read app state.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request, Security, UploadFile
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from groundsearch.service.admission import Admission
from groundsearch.service.capabilities.arithmetic import Arithmetic
from groundsearch.service.capabilities.describe import Describe
from groundsearch.service.capabilities.explain import Explain
from groundsearch.service.capabilities.gallery_writes import GalleryWrites
from groundsearch.service.capabilities.photos import Photos
from groundsearch.service.capabilities.search import Search
from groundsearch.service.components import Capabilities
from groundsearch.service.photo_workers import PhotoWorkers
from groundsearch.service.problems import ServiceError
from groundsearch.service.settings import ServiceSettings
from groundsearch.service.uploads import check_size


async def get_settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


def _capabilities(request: Request) -> Capabilities:
    """The app's capabilities; 503 while the model and gallery are loading."""
    capabilities = request.app.state.capabilities
    if capabilities is None:
        error = request.app.state.load_error
        detail = f"not ready: {error}" if error else "the model is still loading"
        raise ServiceError(503, detail, "not-ready", {"Retry-After": "5"})
    return capabilities


async def get_search(request: Request) -> Search:
    return _capabilities(request).search


async def get_photos(request: Request) -> Photos:
    return _capabilities(request).photos


async def get_describe(request: Request) -> Describe:
    return _capabilities(request).describe


async def get_arithmetic(request: Request) -> Arithmetic:
    return _capabilities(request).arithmetic


async def get_explain(request: Request) -> Explain:
    return _capabilities(request).explain


async def get_writes(request: Request) -> GalleryWrites:
    return _capabilities(request).writes


async def get_admission(request: Request) -> Admission:
    return request.app.state.admission


async def get_photo_workers(request: Request) -> PhotoWorkers:
    return request.app.state.photo_workers


SettingsDep = Annotated[ServiceSettings, Depends(get_settings)]
SearchDep = Annotated[Search, Depends(get_search)]
PhotosDep = Annotated[Photos, Depends(get_photos)]
DescribeDep = Annotated[Describe, Depends(get_describe)]
ArithmeticDep = Annotated[Arithmetic, Depends(get_arithmetic)]
ExplainDep = Annotated[Explain, Depends(get_explain)]
GalleryWritesDep = Annotated[GalleryWrites, Depends(get_writes)]
AdmissionDep = Annotated[Admission, Depends(get_admission)]
PhotoWorkersDep = Annotated[PhotoWorkers, Depends(get_photo_workers)]


def check_k(k: int, settings: ServiceSettings) -> int:
    """422 unless 1 ≤ k ≤ max_k."""
    if not 1 <= k <= settings.max_k:
        raise ServiceError(422, f"k must be between 1 and {settings.max_k}, got {k}")
    return k


async def read_upload(file: UploadFile, settings: ServiceSettings) -> bytes:
    """The uploaded bytes, reading at most one byte past the limit (413 beyond it)."""
    data = await file.read(settings.max_upload_bytes + 1)
    return check_size(data, settings.max_upload_bytes)


bearer = HTTPBearer(
    auto_error=False,
    scheme_name="writeToken",
    description="The server's write token (GROUNDSEARCH_WRITE_TOKEN), for gallery writes.",
)


async def require_writer(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> None:
    """401 without a bearer token, 403 with a wrong one or when writes are disabled."""
    if settings.read_only:
        raise ServiceError(403, "this server is a read-only replica: send writes to the writer")
    if settings.write_token is None:
        raise ServiceError(403, "gallery writes are disabled: the server has no write token")
    token = credentials.credentials.strip() if credentials is not None else ""
    if not token:
        raise ServiceError(
            401,
            "a gallery write needs the header 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    expected = settings.write_token.get_secret_value().encode()
    if not secrets.compare_digest(token.encode(), expected):
        raise ServiceError(403, "wrong write token")


WriterDep = Annotated[None, Depends(require_writer)]
