"""Typed dependencies of the routes, ``async`` (no hop to FastAPI's thread pool)."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request, Security, UploadFile
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from groundsearch.service.core.capabilities.arithmetic import Arithmetic
from groundsearch.service.core.capabilities.describe import Describe
from groundsearch.service.core.capabilities.explain import Explain
from groundsearch.service.core.capabilities.gallery_writes import GalleryWrites
from groundsearch.service.core.capabilities.library import Library
from groundsearch.service.core.capabilities.photos import Photos
from groundsearch.service.core.capabilities.search import PhotoSearch, Search
from groundsearch.service.core.components import Capabilities
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.core.work_threads import WorkThreads
from groundsearch.service.http.admission import Admission
from groundsearch.service.http.problems import ServiceError
from groundsearch.service.http.uploads import check_size

T = TypeVar("T")


def _state(name: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency: the app state's ``name``."""

    async def get(request: Request) -> Any:
        return getattr(request.app.state, name)

    return get


def _capabilities(request: Request) -> Capabilities:
    """The app's capabilities; 503 while the model and gallery are loading."""
    capabilities = request.app.state.capabilities
    if capabilities is None:
        error = request.app.state.load_error
        detail = f"not ready: {error}" if error else "the model is still loading"
        raise ServiceError(503, detail, "not-ready", {"Retry-After": "5"})
    return capabilities


def _capability(pick: Callable[[Capabilities], T]) -> Callable[[Request], Awaitable[T]]:
    """A dependency: the capability ``pick`` chooses among the app's (503 while loading)."""

    async def get(request: Request) -> T:
        return pick(_capabilities(request))

    return get


SettingsDep = Annotated[ServiceSettings, Depends(_state("settings"))]
SearchDep = Annotated[Search, Depends(_capability(lambda c: c.search))]
PhotoSearchDep = Annotated[PhotoSearch, Depends(_capability(lambda c: c.photo_search))]
PhotosDep = Annotated[Photos, Depends(_capability(lambda c: c.photos))]
LibraryDep = Annotated[Library, Depends(_capability(lambda c: c.library))]
DescribeDep = Annotated[Describe, Depends(_capability(lambda c: c.describe))]
ArithmeticDep = Annotated[Arithmetic, Depends(_capability(lambda c: c.arithmetic))]
ExplainDep = Annotated[Explain, Depends(_capability(lambda c: c.explain))]
GalleryWritesDep = Annotated[GalleryWrites, Depends(_capability(lambda c: c.writes))]
AdmissionDep = Annotated[Admission, Depends(_state("admission"))]
PhotoWorkersDep = Annotated[WorkThreads, Depends(_state("photo_workers"))]
ThumbnailWorkersDep = Annotated[WorkThreads, Depends(_state("thumbnail_workers"))]
TextWorkersDep = Annotated[WorkThreads, Depends(_state("text_workers"))]


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


async def require_write_token(
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


WriteTokenDep = Annotated[None, Depends(require_write_token)]
