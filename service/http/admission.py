"""Admission control: a bounded amount of work of each kind, and a quick "no" beyond it.

Each kind of work (``parse``, ``cnn``) has a ``Gate`` of ``concurrency`` slots and a line
of ``queue`` places; beyond both a request is refused at once (429 with ``Retry-After``).
Gates live on the event loop's thread (no locks). Each route declares its work
(``declare_work``): ``EarlyRefusal`` refuses from it before routing or reading a body,
and the routes take their slots from it (``Admission.slots_for``).
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from fastapi.routing import RouteContext, iter_route_contexts
from starlette.requests import Request
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from groundsearch.model.runtime.sentences import UnusableText
from groundsearch.service.http.problems import ServiceError, problem

#: The OpenAPI extension a route's work is declared in (``declare_work``).
WORK_KEY = "x-work"
#: Query values that do not ask for the work a parameter names.
_OFF = {"", "0", "false", "no", "off"}


def declare_work(
    upload: bool = False, cached_by: str | None = None, **kinds: tuple[str, ...]
) -> dict[str, Any]:
    """A route's ``openapi_extra``: each kind of work with the query parameters that ask
    for it (none: always), whether it takes an ``upload``, and the parameter whose text,
    once cached, takes no parse (``cached_by``)."""
    declared = {"kinds": {k: list(p) for k, p in kinds.items()}, "upload": upload}
    return {WORK_KEY: declared | {"cached_by": cached_by}}


@dataclass(frozen=True)
class RouteWork:
    """One route's declared work (``route``: FastAPI's view of it, with its full path)."""

    route: RouteContext
    kinds: dict[str, tuple[str, ...]]
    upload: bool
    cached_by: str | None = None

    def needs(self, query: dict[str, list[str]]) -> tuple[str, ...]:
        """The kinds of work a request with this query string takes."""
        return _needed(self.kinds, query, {})


def _needed(
    kinds: dict[str, tuple[str, ...]], query: dict[str, list[str]], read: dict[str, object]
) -> tuple[str, ...]:
    """The kinds whose parameters ask for them: a value the route has read (``read``),
    else the query string's (present and not "false", "0", …)."""

    def asks(param: str) -> bool:
        if param in read:
            return bool(read[param])
        return any(v.lower() not in _OFF for v in query.get(param, []))

    return tuple(k for k, params in kinds.items() if not params or any(map(asks, params)))


def _declared(route: Any) -> dict[str, tuple[str, ...]]:
    """A route's declared kinds of work with their parameters ({} when it declares none)."""
    declared = (getattr(route, "openapi_extra", None) or {}).get(WORK_KEY)
    return {} if declared is None else {k: tuple(p) for k, p in declared["kinds"].items()}


def declared_work(routes: Sequence[BaseRoute]) -> list[RouteWork]:
    """The declared work of every route (included routers' too) that declares some."""
    return [
        RouteWork(route, _declared(route), bool(declared["upload"]), declared.get("cached_by"))
        for route in iter_route_contexts(routes)
        if (declared := (getattr(route, "openapi_extra", None) or {}).get(WORK_KEY)) is not None
    ]


class Overloaded(ServiceError):
    """The waiting line of a kind of work is full: HTTP 429 with ``Retry-After``."""

    def __init__(self, kind: str, retry_after: int) -> None:
        detail = f"the server is busy ({kind} work queue full): retry in {retry_after} s"
        super().__init__(429, detail, "overloaded", {"Retry-After": str(retry_after)})
        self.kind = kind


@dataclass
class Gate:
    """At most ``concurrency`` holders, ``queue`` waiters; more are refused (Overloaded)."""

    kind: str
    concurrency: int
    queue: int
    #: Typical seconds one request of this kind holds its slot (for ``Retry-After``).
    seconds_per_request: float = 0.05
    on_change: Callable[[Gate], None] = lambda gate: None
    active: int = 0
    refused: int = 0
    _waiters: deque[asyncio.Future[None]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.on_change(self)  # its gauges read 0 from the start, not after its first request

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def full(self) -> bool:
        """No free slot and no place in line: the next request would be refused."""
        return self.active >= self.concurrency and self.waiting >= self.queue

    def refuse(self) -> Overloaded:
        """Count a refusal; the error to answer it with."""
        self.refused += 1
        self.on_change(self)
        return Overloaded(self.kind, self.retry_after())

    def retry_after(self) -> int:
        """Whole seconds until the line ahead would have drained (at least 1)."""
        ahead = self.waiting + self.active
        return max(1, math.ceil(ahead * self.seconds_per_request / max(self.concurrency, 1)))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the block (waiting in line for it if need be)."""
        if self.active < self.concurrency and not self._waiters:
            self.active += 1
        elif self.waiting >= self.queue:
            raise self.refuse()
        else:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            self.on_change(self)
            try:
                await waiter  # a finishing holder hands its slot over (``active`` unchanged)
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                elif not waiter.cancelled():  # handed a slot as it was cancelled
                    self._release()
                raise
        self.on_change(self)
        try:
            yield
        finally:
            self._release()

    def _release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self.on_change(self)
                return
        self.active -= 1
        self.on_change(self)


class Admission:
    """The gates of a server, by kind of work."""

    def __init__(self, gates: list[Gate]) -> None:
        self.gates = {g.kind: g for g in gates}

    def slots_for(
        self, request: Request, cached: bool = False, **read: object
    ) -> AbstractAsyncContextManager[None]:
        """The slots this request takes as its route declares them (``read``: the values
        it read; ``cached``: the query's vector is cached, no parse)."""
        query = parse_qs(request.scope.get("query_string", b"").decode("latin-1"))
        kinds = _needed(_declared(request.scope.get("route")), query, read)
        return self.slots(*(k for k in kinds if not (cached and k == "parse")))

    @asynccontextmanager
    async def slots(self, *kinds: str) -> AsyncIterator[None]:
        """Hold a slot of each kind (taken in one fixed order, so holders never deadlock)."""
        async with AsyncExitStack() as stack:
            for kind in sorted(set(kinds)):
                await stack.enter_async_context(self.gates[kind].slot())
            yield


class EarlyRefusal:
    """ASGI middleware: 429 at once for a request whose declared work is full."""

    def __init__(self, app: ASGIApp, admission: Admission, work: list[RouteWork]) -> None:
        self.app, self.admission, self.work = app, admission, work

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            declared = self._declared(scope)
            needs = declared.needs(_query(scope)) if declared is not None else ()
            full = [k for k in needs if self.admission.gates[k].full]
            if full and not self._cached(scope, declared):
                exc = self.admission.gates[full[0]].refuse()
                answer = problem(Request(scope), 429, exc.detail, exc.slug, exc.headers)
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _declared(self, scope: Scope) -> RouteWork | None:
        for declared in self.work:
            if declared.route.matches(scope)[0] == Match.FULL:
                return declared
        return None

    @staticmethod
    def _cached(scope: Scope, declared: RouteWork | None) -> bool:
        """Whether the route's ``cached_by`` text has its vector cached."""
        capabilities = scope["app"].state.capabilities
        if declared is None or declared.cached_by is None or capabilities is None:
            return False
        texts = _query(scope).get(declared.cached_by)
        if not texts:
            return False
        try:
            return capabilities.search.is_cached(capabilities.search.clean(texts[0]))
        except UnusableText:
            return False


def _query(scope: Scope) -> dict[str, list[str]]:
    return parse_qs(scope.get("query_string", b"").decode("latin-1"))


def front_spec(routes: Sequence[BaseRoute], admission: Admission, cache_size: int) -> dict:
    """What the front process needs to refuse as the app would, as plain JSON."""
    out = []
    for work in declared_work(routes):
        route: Any = work.route._effective_route
        methods = sorted(getattr(route, "methods", None) or ())
        regex = getattr(route, "path_regex", None)
        if regex is None or not methods:
            continue
        kinds = {k: list(p) for k, p in work.kinds.items()}
        out.append(
            dict(regex=regex.pattern, methods=methods, kinds=kinds, cached_by=work.cached_by)
        )
    fields = ("kind", "concurrency", "queue", "seconds_per_request")
    gates = [{f: getattr(g, f) for f in fields} for g in admission.gates.values()]
    return {"routes": out, "gates": gates, "cache_size": cache_size}
