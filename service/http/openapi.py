"""The OpenAPI document, completed with the limits that are settings, the photo formats
an upload may be in, and one error body (``Problem``) in place of FastAPI's own."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from groundsearch.model.runtime.images.photos import upload_media_types
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.http.problems import FieldError, Problem, responses

#: The media types of the formats an upload may be in.
PHOTO_MEDIA_TYPES = ", ".join(upload_media_types())


def install(app: FastAPI, settings: ServiceSettings) -> None:
    """Serve the completed document at ``app.openapi_url`` (made once, then cached)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            doc = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                routes=app.routes,
                tags=app.openapi_tags,
            )
            app.openapi_schema = complete(doc, settings)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def complete(doc: dict[str, Any], settings: ServiceSettings) -> dict[str, Any]:
    """``doc`` with the settings' limits, the upload formats and Problem error bodies."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    ref = "#/components/schemas/{model}"
    schemas["Problem"] = Problem.model_json_schema(ref_template=ref)
    schemas["Problem"].pop("$defs", None)
    schemas["FieldError"] = FieldError.model_json_schema(ref_template=ref)
    for path_item in doc.get("paths", {}).values():
        for operation in path_item.values():
            for param in operation.get("parameters", []):
                _limit(param["name"], param["schema"], settings)
            if "422" in operation.get("responses", {}):
                operation["responses"]["422"] = responses(422)[422]
            body = operation.get("requestBody", {}).get("content", {})
            form = body.get("multipart/form-data")
            if form is not None:
                name = form["schema"]["$ref"].rsplit("/", 1)[1]
                _limit_form(schemas[name], form, settings)
    return doc


def _limit(name: str, schema: dict[str, Any], settings: ServiceSettings) -> None:
    """The settings' limits on a query or path parameter's schema."""
    if name == "k":
        schema["maximum"] = settings.max_k
    elif name == "text":
        schema.update(minLength=1, maxLength=settings.max_text_chars)
    elif name in ("plus", "minus"):
        schema["items"].update(minLength=1, maxLength=settings.max_text_chars)


def _limit_form(schema: dict[str, Any], form: dict[str, Any], settings: ServiceSettings) -> None:
    """The upload's size and formats and the captions' limits on a multipart body."""
    props = schema.get("properties", {})
    image = props.get("image")
    if image is not None:
        # The byte limit is stated in words: schemathesis cannot fuzz a binary maxLength.
        image.update(type="string", format="binary")
        image["description"] = (
            f"{image.get('description', 'A photo.')} At most "
            f"{settings.max_upload_bytes:,} bytes and {settings.max_pixels:,} pixels."
        )
        image.pop("contentMediaType", None)
        form.setdefault("encoding", {})["image"] = {"contentType": PHOTO_MEDIA_TYPES}
    if "captions" in props:
        props["captions"].update(maxItems=settings.max_captions)
        props["captions"]["items"].update(maxLength=settings.max_text_chars)
