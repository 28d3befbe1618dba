"""Typed dependencies of the routes: the engine, the settings, limits and the writer check."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request, UploadFile

from groundsearch.service.engine import Engine
from groundsearch.service.settings import ServiceSettings
from groundsearch.service.uploads import check_size


def get_settings(request: Request) -> ServiceSettings:
    return request.app.state.settings


def get_engine(request: Request) -> Engine:
    engine = request.app.state.engine
    if engine is None:
        error = request.app.state.load_error
        raise HTTPException(503, f"not ready: {error}" if error else "the model is still loading")
    return engine


SettingsDep = Annotated[ServiceSettings, Depends(get_settings)]
EngineDep = Annotated[Engine, Depends(get_engine)]


def check_k(k: int, settings: ServiceSettings) -> int:
    """422 unless 1 ≤ k ≤ max_k."""
    if not 1 <= k <= settings.max_k:
        raise HTTPException(422, f"k must be between 1 and {settings.max_k}, got {k}")
    return k


async def read_upload(file: UploadFile, settings: ServiceSettings) -> bytes:
    """The uploaded bytes, reading at most one byte past the limit (413 beyond it)."""
    data = await file.read(settings.max_upload_bytes + 1)
    return check_size(data, settings.max_upload_bytes)


def require_writer(
    settings: SettingsDep,
    authorization: Annotated[str | None, Header(description="Bearer <write token>")] = None,
) -> None:
    """401 without a bearer token, 403 with a wrong one or when writes are disabled."""
    if settings.write_token is None:
        raise HTTPException(403, "gallery writes are disabled: the server has no write token")
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(
            401,
            "a gallery write needs the header 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    expected = settings.write_token.get_secret_value().encode()
    if not secrets.compare_digest(token.strip().encode(), expected):
        raise HTTPException(403, "wrong write token")


WriterDep = Annotated[None, Depends(require_writer)]
