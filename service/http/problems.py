"""Every error the service answers, as RFC 9457 problem details::

    {"type": "/problems/unusable-text", "title": "Unusable text", "status": 404,
     "detail": "text has no word the model knows ...", "instance": "/search"}

Validation errors add ``errors``; ``responses(...)`` declares a route's in OpenAPI.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

MEDIA_TYPE = "application/problem+json"
Headers = Mapping[str, str] | None

#: The problem type of each status when the code raising it names none.
DEFAULT_SLUGS = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    413: "too-large",
    415: "unsupported-media-type",
    422: "invalid-request",
    429: "overloaded",
    501: "not-implemented",
    503: "unavailable",
}
#: What each declared status means, for the OpenAPI document.
DESCRIPTIONS = {
    400: "The request body could not be read (malformed multipart).",
    401: "No bearer token (`Authorization: Bearer <token>`).",
    403: "Wrong token, or gallery writes are disabled (no token configured).",
    404: "Unknown image id, or a text the model cannot use (`/problems/unusable-text`).",
    413: "Upload over the byte limit, or a photo over the pixel limit.",
    415: "The upload is not an image in a supported format.",
    422: "Invalid parameters (`errors` lists them), an empty or undecodable upload.",
    429: "Too much work queued of this kind: retry after `Retry-After` seconds.",
    501: "Written sentences were asked for, but this server has no caption decoder "
    "(`/problems/no-decoder`; `/ready` says why).",
    503: "The model and gallery are still loading (see `/ready`), or the gallery store "
    "could not be read or written.",
}


class FieldError(BaseModel):
    """One invalid parameter of a request."""

    loc: list[str | int] = Field(description="Where: e.g. ['query', 'k'].")
    msg: str
    type: str


class Problem(BaseModel):
    """An error (RFC 9457 problem details)."""

    type: str = Field(description="The kind of problem, e.g. '/problems/unusable-text'.")
    title: str = Field(description="A short summary of that kind of problem.")
    status: int = Field(description="The HTTP status.")
    detail: str = Field(description="What went wrong with this request.")
    instance: str = Field(description="The path of the request.")
    errors: list[FieldError] | None = Field(
        default=None, description="The invalid parameters (validation errors only)."
    )


class ServiceError(Exception):
    """A refusal with its status and problem type (``slug``), answered as a Problem."""

    def __init__(
        self, status: int, detail: str, slug: str | None = None, headers: Headers = None
    ) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail
        self.slug = slug or DEFAULT_SLUGS.get(status, "error")
        self.headers = dict(headers or {})


def problem(
    request: Request,
    status: int,
    detail: str,
    slug: str | None = None,
    headers: Headers = None,
    errors: list[dict[str, Any]] | None = None,
) -> JSONResponse:
    slug = slug or DEFAULT_SLUGS.get(status, "error")
    body: dict[str, Any] = {
        "type": f"/problems/{slug}",
        "title": slug.replace("-", " ").capitalize(),
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status, headers=dict(headers or {}), media_type=MEDIA_TYPE)


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entries of these error statuses (Problem bodies)."""
    schema = {"$ref": "#/components/schemas/Problem"}
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        entry: dict[str, Any] = {
            "description": DESCRIPTIONS.get(status, HTTPStatus(status).phrase),
            "content": {MEDIA_TYPE: {"schema": schema}},
        }
        if status == 429:
            entry["headers"] = {
                "Retry-After": {
                    "description": "Seconds to wait before retrying.",
                    "schema": {"type": "integer"},
                }
            }
        out[status] = entry
    return out


def _field_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    return [
        {
            "loc": [str(p) if not isinstance(p, int) else p for p in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in exc.errors()
    ]


def install(app: FastAPI) -> None:
    """Answer every error of ``app`` as a Problem."""

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError) -> JSONResponse:
        return problem(request, exc.status, exc.detail, exc.slug, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return problem(request, exc.status_code, detail, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = _field_errors(exc)
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or e['loc'][0]}: {e['msg']}"
            for e in errors[:5]
        )
        return problem(request, 422, f"invalid request: {where}", errors=errors)
