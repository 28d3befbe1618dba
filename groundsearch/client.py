"""A typed Python client of the groundsearch HTTP API (docs/API.md), over ``httpx``.

    from groundsearch.client import Client, GroundsearchError

    with Client("http://127.0.0.1:8000") as gs:          # default: $GROUNDSEARCH_URL or :8000
        page = gs.search("a dog runs on the beach", k=5, after="2024-06-01")
        for hit in page.results:
            print(hit.score, hit.relevance, hit.folder, hit.file)
        for page in gs.search_pages("a dog", k=20):      # every page, following `next`
            ...
        photo = gs.photo(page.results[0].id)             # the photo's bytes
        gs.describe(photo).generated[0].text             # "A dog runs through the grass ."

Every route has a method; listing methods take the photo filters (``filters()``) as
keywords; gallery writes need ``Client(token=...)``. Answers are dataclasses mirroring
``service/http/schemas.py``. An error answer, or no answer (``status`` None), raises
``GroundsearchError`` with the RFC 9457 problem document; a 429 is retried after its
``Retry-After``. Only ``httpx`` and the standard library are imported.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import IO, Any, Literal, TypeVar, Union

import httpx

__all__ = [
    "DEFAULT_URL",
    "AddedPhoto",
    "CaptionHit",
    "Client",
    "Concept",
    "DescribeResponse",
    "ExplainResponse",
    "FieldError",
    "GroundsearchError",
    "Health",
    "ImageHit",
    "ImagesResponse",
    "ParaphraseResponse",
    "Place",
    "Readiness",
    "RemovedPhoto",
    "SearchResponse",
    "TreeNode",
    "WrittenSentence",
]

#: The server a client talks to when none is named and ``GROUNDSEARCH_URL`` is unset.
DEFAULT_URL = "http://127.0.0.1:8000"
#: A photo to upload: its bytes, a path, or a binary file object.
PhotoInput = bytes | str | os.PathLike[str] | IO[bytes]
#: A photo filter's value (``Client.filters()`` lists them): ISO 8601 text or a date,
#: ``(lat, lon)`` or "lat,lon" for ``near``, a number, or text.
Filter = str | float | date | datetime | tuple[float, float]
Order = Literal["relevance", "date", "-date"]
Sentences = Literal["both", "generated", "retrieved"]
#: The longest a 429's Retry-After is waited for (seconds).
MAX_RETRY_WAIT = 30.0

T = TypeVar("T")
Paged = TypeVar("Paged", "SearchResponse", "ImagesResponse", "LibraryResponse")


@dataclass(frozen=True)
class Place:
    """Where a photo was taken (EXIF GPS), WGS84 degrees."""

    lat: float
    lon: float


@dataclass(frozen=True, kw_only=True)
class _Photo:
    """What every listed photo carries: id, URL, captions and what its file says."""

    id: int
    url: str
    file: str
    captions: list[str]
    source: str  # "folder" | "upload"
    taken: str | None = None
    taken_source: str | None = None
    camera: str | None = None
    place: Place | None = None
    width: int | None = None
    height: int | None = None
    folder: str | None = None

    @property
    def path(self) -> str | None:
        """Where an indexed photo lies on the server's disk (None for an upload)."""
        return None if self.folder is None else str(Path(self.folder) / self.file)


@dataclass(frozen=True, kw_only=True)
class ImageHit(_Photo):
    """A gallery photo found by a query: with its score and relevance."""

    score: float
    relevance: float | None


@dataclass(frozen=True, kw_only=True)
class GalleryPhoto(_Photo):
    """A photo of the library listing (``GET /images``): no query, so no score."""

    thumbnail: str


@dataclass(frozen=True)
class LibraryResponse:
    """A page of ``GET /images``: the gallery's photos by date, ``next`` and ``total``."""

    results: list[GalleryPhoto]
    order: str
    next: str | None = None
    total: int = 0


@dataclass(frozen=True)
class CaptionHit:
    """A caption: a gallery caption (with its photo) or one of the caption bank's."""

    id: int | None
    score: float
    relevance: float | None
    text: str
    source: str  # "gallery" | "bank"
    image_id: int | None
    image_url: str | None


@dataclass(frozen=True)
class WrittenSentence:
    """A new sentence the caption decoder wrote."""

    text: str
    score: float


@dataclass(frozen=True)
class Concept:
    """A class the backbone's ImageNet classifier saw in a photo."""

    word: str | None
    imagenet_class: str
    probability: float
    word_probability: float


@dataclass(frozen=True)
class SearchResponse:
    """A page of ``/search`` or ``/search/image``."""

    query: str
    results: list[ImageHit]
    timings_ms: dict[str, float]
    weak: list[ImageHit] = field(default_factory=list)
    no_match: bool = False
    min_relevance: float | None = None
    order: str = "relevance"
    next: str | None = None
    total: int | None = None
    total_exact: bool | None = None


@dataclass(frozen=True)
class ImagesResponse:
    """Photos of ``/images/{id}/similar`` (a page) or ``/arithmetic``."""

    results: list[ImageHit]
    weak: list[ImageHit] = field(default_factory=list)
    no_match: bool = False
    min_relevance: float | None = None
    order: str | None = None
    next: str | None = None
    total: int | None = None
    total_exact: bool | None = None
    generated: list[WrittenSentence] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class DescribeResponse:
    """``/describe``: written sentences, found captions and what the classifier saw."""

    generated: list[WrittenSentence]
    results: list[CaptionHit]
    timings_ms: dict[str, float]
    concepts: list[Concept] = field(default_factory=list)
    weak: list[CaptionHit] = field(default_factory=list)
    no_match: bool = False
    min_relevance: float | None = None


@dataclass(frozen=True)
class ParaphraseResponse:
    query: str
    generated: list[WrittenSentence]
    timings_ms: dict[str, float]


@dataclass(frozen=True)
class TreeNode:
    """A word of ``/explain``'s tree, with its share of the sentence vector."""

    index: int
    word: str
    upos: str
    deprel: str
    head: int
    size: int
    share: float | None


@dataclass(frozen=True)
class ExplainResponse:
    text: str
    encoder: str
    root: int
    nodes: list[TreeNode]
    timings_ms: dict[str, float]


@dataclass(frozen=True)
class AddedPhoto:
    """A photo added to the gallery (``new`` False: the same bytes were there)."""

    id: int
    url: str
    captions: list[int]
    new: bool


@dataclass(frozen=True)
class RemovedPhoto:
    id: int
    removed_captions: int


@dataclass(frozen=True)
class Health:
    status: str


@dataclass(frozen=True)
class Readiness:
    """``/ready``: what the server has loaded."""

    ready: bool
    encoder: str
    checkpoint: str
    images: int
    captions: int
    caption_bank: str
    indexes: dict[str, str] = field(default_factory=dict)
    read_only: bool = False
    decoder: str = "none"
    concepts: float = 0.0
    relevance: str = "none"
    hubness: str = "none"
    fusion: str = "none"
    model: str = "shipped"


@dataclass(frozen=True)
class FieldError:
    """One invalid parameter of a request (a 422's ``errors``)."""

    loc: list[str | int]
    msg: str
    type: str


class GroundsearchError(Exception):
    """An error answer with its problem document, or no answer (``status`` None)."""

    def __init__(
        self,
        status: int | None,
        type: str,
        title: str,
        detail: str,
        instance: str | None = None,
        errors: Sequence[FieldError] = (),
        problem: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}" if status is not None else detail)
        self.status, self.type, self.title, self.detail = status, type, title, detail
        self.instance, self.retry_after = instance, retry_after  # Retry-After: seconds
        #: the invalid parameters of a 422 (``loc`` names each: ["query", "near"])
        self.errors = list(errors)
        #: the problem document as the server sent it
        self.problem: dict[str, Any] = dict(problem or {})

    @property
    def parameters(self) -> list[str]:
        """The parameters a 422 names (the last part of each error's ``loc``)."""
        return [str(e.loc[-1]) for e in self.errors if e.loc]

    @classmethod
    def of(cls, res: httpx.Response) -> GroundsearchError:
        """The error of an answer: its problem document, or one made from its status."""
        retry = _seconds(res.headers.get("Retry-After"))
        try:
            body = res.json()
        except ValueError:
            body = None
        reason = res.reason_phrase or "Error"
        if not isinstance(body, dict) or "status" not in body:
            text = res.text.strip()[:300] or reason
            return cls(res.status_code, "about:blank", reason, text, None, (), {}, retry)
        errors = [
            FieldError(list(e.get("loc", [])), str(e.get("msg", "")), str(e.get("type", "")))
            for e in body.get("errors") or []
            if isinstance(e, dict)
        ]
        return cls(
            int(body.get("status", res.status_code)),
            str(body.get("type", "about:blank")),
            str(body.get("title", reason)),
            str(body.get("detail", "")),
            body.get("instance"),
            errors,
            body,
            retry,
        )


def _seconds(value: str | None) -> float | None:
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: not sent by this server


def _read(kind: Any, value: Any) -> Any:
    """``value`` (parsed JSON) as ``kind`` (a dataclass, a list of them, optional, plain)."""
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in typing.get_args(kind) if dataclasses.is_dataclass(a)]
        return _read(inner[0], value) if inner else value
    if origin is list:
        (item,) = typing.get_args(kind)
        return [_read(item, v) for v in value]
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return _build(kind, value)
    return value


def _build(cls: type[T], data: Any) -> T:
    """A dataclass from a JSON object; unknown fields ignored, missing ones defaulted."""
    if not isinstance(data, dict):
        raise _invalid(f"expected a JSON object, got {data!r:.200}")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values = {k: _read(hints[k], v) for k, v in data.items() if k in known}
    try:
        return cls(**values)
    except TypeError as exc:
        raise _invalid(f"{cls.__name__}: {exc}") from None


def _invalid(detail: str, status: int | None = None) -> GroundsearchError:
    return GroundsearchError(status, "invalid-answer", "Invalid answer", detail)


def _answer(kind: Any, res: httpx.Response, request: str) -> Any:
    """An answer as ``kind``: a dataclass, ``bytes`` (the body) or None (the JSON)."""
    if kind is bytes:
        return res.content
    try:
        answer = res.json()
    except ValueError:
        detail = f"{request}: the answer is not JSON: {res.text[:200]!r}"
        raise _invalid(detail, res.status_code) from None
    return answer if kind is None else _build(kind, answer)


class Client:
    """A groundsearch server at ``base_url`` (default: ``$GROUNDSEARCH_URL``, else
    ``DEFAULT_URL``); ``token``: the write token; ``retries``: a 429's retries."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        timeout: float = 120.0,
        retries: int = 2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base = base_url or os.environ.get("GROUNDSEARCH_URL") or DEFAULT_URL
        self.base_url = base.rstrip("/")
        self.token, self.retries = token, retries
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        self._filter_specs: list[dict[str, Any]] | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def search(
        self,
        text: str,
        *,
        k: int = 10,
        min_relevance: float | None = None,
        order: Order = "relevance",
        cursor: str | None = None,
        **filters: Filter | None,
    ) -> SearchResponse:
        """``POST /search``: the gallery photos that best match ``text``, filtered, a page."""
        params = _query(text=text, k=k, min_relevance=min_relevance, order=order, cursor=cursor)
        return self._ask(SearchResponse, "POST", "/search", params, filters)

    def search_pages(self, text: str, **options: Any) -> Iterator[SearchResponse]:
        """Every page of ``search(text, **options)``, first to last, following ``next``."""
        return _pages(functools.partial(self.search, text), options)

    def search_image(
        self,
        image: PhotoInput,
        *,
        text: str | None = None,
        k: int = 10,
        min_relevance: float | None = None,
        order: Order = "relevance",
        cursor: str | None = None,
        filename: str | None = None,
        **filters: Filter | None,
    ) -> SearchResponse:
        """``POST /search/image``: the photos most like a photo (steered by ``text``)."""
        params = _query(text=text, k=k, min_relevance=min_relevance, order=order, cursor=cursor)
        return self._ask(SearchResponse, "POST", "/search/image", params, filters, image, filename)

    def search_image_pages(self, image: PhotoInput, **options: Any) -> Iterator[SearchResponse]:
        """Every page of ``search_image(image, **options)`` (the photo is read once)."""
        name, data = _photo(image, options.pop("filename", None))
        return _pages(functools.partial(self.search_image, data, filename=name), options)

    def similar(
        self,
        image_id: int,
        *,
        k: int = 10,
        min_relevance: float | None = None,
        order: Order = "relevance",
        cursor: str | None = None,
        **filters: Filter | None,
    ) -> ImagesResponse:
        """``GET /images/{id}/similar``: the photos closest to this one (itself left out)."""
        params = _query(k=k, min_relevance=min_relevance, order=order, cursor=cursor)
        return self._ask(ImagesResponse, "GET", f"/images/{int(image_id)}/similar", params, filters)

    def similar_pages(self, image_id: int, **options: Any) -> Iterator[ImagesResponse]:
        """Every page of ``similar(image_id, **options)``."""
        return _pages(functools.partial(self.similar, image_id), options)

    def describe(
        self,
        image: PhotoInput,
        *,
        k: int = 5,
        sentences: Sentences = "both",
        beam: int | None = None,
        min_relevance: float | None = None,
        filename: str | None = None,
    ) -> DescribeResponse:
        """``POST /describe``: written sentences, the ``k`` best captions, and concepts."""
        params = _query(k=k, sentences=sentences, beam=beam, min_relevance=min_relevance)
        return self._ask(DescribeResponse, "POST", "/describe", params, None, image, filename)

    def paraphrase(self, text: str, *, beam: int | None = None) -> ParaphraseResponse:
        """``POST /paraphrase``: the text's vector written back into words."""
        return self._ask(ParaphraseResponse, "POST", "/paraphrase", _query(text=text, beam=beam))

    def explain(self, text: str) -> ExplainResponse:
        """``GET /explain``: the text's dependency tree, each word's share of its vector."""
        return self._ask(ExplainResponse, "GET", "/explain", _query(text=text))

    def arithmetic(
        self,
        image_id: int,
        *,
        plus: Iterable[str] = (),
        minus: Iterable[str] = (),
        k: int = 10,
        rerank: bool = False,
        sentence: bool = False,
        min_relevance: float | None = None,
        **filters: Filter | None,
    ) -> ImagesResponse:
        """``POST /arithmetic``: photos near ``photo − Σ minus + Σ plus``."""
        params = _query(image_id=image_id) + _terms(plus, minus, k, rerank, sentence, min_relevance)
        return self._ask(ImagesResponse, "POST", "/arithmetic", params, filters)

    def arithmetic_upload(
        self,
        image: PhotoInput,
        *,
        plus: Iterable[str] = (),
        minus: Iterable[str] = (),
        k: int = 10,
        rerank: bool = False,
        sentence: bool = False,
        min_relevance: float | None = None,
        filename: str | None = None,
        **filters: Filter | None,
    ) -> ImagesResponse:
        """``POST /arithmetic/upload``: the same, from an uploaded photo."""
        params, path = _terms(plus, minus, k, rerank, sentence, min_relevance), "/arithmetic/upload"
        return self._ask(ImagesResponse, "POST", path, params, filters, image, filename)

    def photo(self, image_id: int) -> bytes:
        """``GET /images/{id}``: the gallery photo's bytes, upright."""
        return self._ask(bytes, "GET", f"/images/{int(image_id)}")

    def thumbnail(self, image_id: int, size: int = 256) -> bytes:
        """``GET /images/{id}/thumbnail``: the photo as a small JPEG, upright."""
        return self._ask(bytes, "GET", f"/images/{int(image_id)}/thumbnail", _query(size=size))

    def library(
        self,
        *,
        k: int = 50,
        order: Literal["-date", "date"] = "-date",
        cursor: str | None = None,
        **filters: Filter | None,
    ) -> LibraryResponse:
        """``GET /images``: the gallery's photos by date taken, filtered, a page."""
        params = _query(k=k, order=order, cursor=cursor)
        return self._ask(LibraryResponse, "GET", "/images", params, filters)

    def library_pages(self, **options: Any) -> Iterator[LibraryResponse]:
        """Every page of ``library(**options)``."""
        return _pages(self.library, options)

    def describe_photo(
        self,
        image_id: int,
        *,
        k: int = 5,
        sentences: Sentences = "both",
        beam: int | None = None,
        min_relevance: float | None = None,
    ) -> DescribeResponse:
        """``GET /images/{id}/describe``: what ``describe`` answers for a gallery photo."""
        params = _query(k=k, sentences=sentences, beam=beam, min_relevance=min_relevance)
        return self._ask(DescribeResponse, "GET", f"/images/{int(image_id)}/describe", params)

    def add_photo(
        self, image: PhotoInput, *, captions: Iterable[str] = (), filename: str | None = None
    ) -> AddedPhoto:
        """``POST /gallery/images`` (token): add a photo, or captions to the same one."""
        data, path = {"captions": list(captions)}, "/gallery/images"
        return self._ask(AddedPhoto, "POST", path, [], {}, image, filename, data=data, auth=True)

    def remove_photo(self, image_id: int) -> RemovedPhoto:
        """``DELETE /gallery/images/{id}`` (needs the token): remove a photo, its captions."""
        return self._ask(RemovedPhoto, "DELETE", f"/gallery/images/{int(image_id)}", auth=True)

    def health(self) -> Health:
        """``GET /health``: the process answers."""
        return self._ask(Health, "GET", "/health")

    def ready(self) -> Readiness:
        """``GET /ready``: what the server loaded (GroundsearchError 503 while loading)."""
        return self._ask(Readiness, "GET", "/ready")

    def wait_ready(self, timeout: float = 300.0, every: float = 0.5) -> Readiness:
        """``ready()`` once loaded: waits through 503s and refused connections."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.ready()
            except GroundsearchError as exc:
                if exc.status not in (None, 503) or time.monotonic() >= deadline:
                    raise
            time.sleep(every)

    def filters(self) -> list[dict[str, Any]]:
        """``GET /filters`` (read once): the filters every listing method takes as keywords."""
        if self._filter_specs is None:
            self._filter_specs = self._ask(None, "GET", "/filters")
        return list(self._filter_specs)

    def _ask(
        self,
        kind: Any,
        method: str,
        path: str,
        params: list[tuple[str, str]] | None = None,
        filters: Mapping[str, Filter | None] | None = None,
        image: PhotoInput | None = None,
        filename: str | None = None,
        **request: Any,
    ) -> Any:
        """A request's answer as ``kind``; a filter the server lacks is a TypeError."""
        given = {name: value for name, value in (filters or {}).items() if value is not None}
        known = {spec["name"] for spec in self.filters()} if given else set()
        if unknown := sorted(set(given) - known):
            names = ", ".join(sorted(known))
            raise TypeError(f"unknown filter {', '.join(unknown)}: the server takes {names}")
        if image is not None:
            request["files"] = {"image": _photo(image, filename)}
        res = _send(self, method, path, params=(params or []) + _query(**given), **request)
        return _answer(kind, res, f"{method} {path}")


def _send(
    client: Client, method: str, path: str, auth: bool = False, **request: Any
) -> httpx.Response:
    """A request's answer (a 429 retried); GroundsearchError for an error or no answer."""
    headers = {"Authorization": f"Bearer {client.token}"} if auth and client.token else {}
    for attempt in range(client.retries + 1):
        try:
            res = client._http.request(method, path, headers=headers, **request)
        except httpx.TransportError as exc:
            detail = f"no answer from {client.base_url} ({type(exc).__name__}: {exc})"
            raise GroundsearchError(None, "unreachable", "Unreachable", detail) from exc
        if res.status_code < 400:
            return res
        error = GroundsearchError.of(res)
        if res.status_code != 429 or attempt == client.retries:
            raise error
        time.sleep(min(error.retry_after or 1.0, MAX_RETRY_WAIT))
    raise AssertionError("unreachable")  # pragma: no cover


def _pages(read: Callable[..., Paged], options: dict[str, Any]) -> Iterator[Paged]:
    """Every page of ``read(**options)``, following ``next`` from the first."""
    if "cursor" in options:
        raise TypeError("the pages start at the first: pass no cursor")

    def pages() -> Iterator[Paged]:
        cursor: str | None = None
        while True:
            page = read(**options, cursor=cursor)
            yield page
            if (cursor := page.next) is None:
                return

    return pages()


def _query(**values: Any) -> list[tuple[str, str]]:
    """Query parameters, those that are None left out (the server's defaults)."""
    return [(k, _text(v)) for k, v in values.items() if v is not None]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, date | datetime):
        return value.isoformat()
    if isinstance(value, tuple):  # a place: "lat,lon"
        return f"{float(value[0])!r},{float(value[1])!r}"
    return str(value)


def _terms(
    plus: Iterable[str],
    minus: Iterable[str],
    k: int,
    rerank: bool,
    sentence: bool,
    min_relevance: float | None,
) -> list[tuple[str, str]]:
    """Both arithmetic routes' parameters (a string is one phrase, not its letters)."""
    phrases = [
        (sign, str(p))
        for sign, values in (("plus", plus), ("minus", minus))
        for p in ([values] if isinstance(values, str) else values)
    ]
    return phrases + _query(k=k, rerank=rerank, sentence=sentence, min_relevance=min_relevance)


def _photo(image: PhotoInput, filename: str | None) -> tuple[str, bytes]:
    """An upload's (file name, bytes) from bytes, a path or a binary file."""
    if isinstance(image, bytes | bytearray | memoryview):
        return filename or "photo", bytes(image)
    if isinstance(image, str | os.PathLike):
        path = Path(image)
        return filename or path.name, path.read_bytes()
    data = image.read()
    if not isinstance(data, bytes):
        raise TypeError("a photo file must be opened in binary mode ('rb')")
    name = getattr(image, "name", None)
    return filename or (Path(name).name if isinstance(name, str) else "photo"), data
