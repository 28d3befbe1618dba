"""The service over HTTP: the FastAPI application (``app``), its routes, their typed
dependencies, request and response bodies, errors as problem details, admission control,
upload limits, metrics and the OpenAPI document. Every route calls one capability of
``service.core``."""
