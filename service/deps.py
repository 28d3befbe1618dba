"""Typed dependencies of the routes: engine, settings, admission, limits, the writer check.

They are ``async``: FastAPI runs a plain ``def`` dependency in the thread pool, a hop that
waits behind the model work under load; these only read app state.
"""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request, Security, UploadFile
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from groundsearch.service.admission import Admission
from groundsearch.service.engine import Engine
from groundsearch.service.photo_workers import PhotoWorkers
from groundsearch.service.problems import ServiceError
from groundsearch.service.settings import ServiceSettings
from groundsearch.service.uploads import check_size


async def get_settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


async def get_engine(request: Request) -> Engine:
    engine = request.app.state.engine
    if engine is None:
        error = request.app.state.load_error
        detail = f"not ready: {error}" if error else "the model is still loading"
        raise ServiceError(503, detail, "not-ready", {"Retry-After": "5"})
    return engine


async def get_admission(request: Request) -> Admission:
    return request.app.state.admission


async def get_photo_workers(request: Request) -> PhotoWorkers:
    return request.app.state.photo_workers


SettingsDep = Annotated[ServiceSettings, Depends(get_settings)]
EngineDep = Annotated[Engine, Depends(get_engine)]
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
