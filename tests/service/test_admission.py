"""Admission control: slots, a bounded waiting line, an immediate 429 beyond it."""

from __future__ import annotations

import asyncio
import inspect
import threading
from types import SimpleNamespace

import pytest
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from starlette.requests import Request

from groundsearch.service.http.admission import (
    Admission,
    Gate,
    Overloaded,
    declare_work,
    declared_work,
)
from groundsearch.service.http.app import create_app


def test_a_gate_admits_queues_and_refuses_at_once():
    async def scenario() -> tuple[list[str], Gate]:
        gate = Gate("parse", concurrency=1, queue=1, seconds_per_request=0.5)
        release = asyncio.Event()
        order: list[str] = []

        async def hold(name: str) -> None:
            async with gate.slot():
                order.append(name)
                await release.wait()

        first = asyncio.create_task(hold("first"))
        await asyncio.sleep(0)
        second = asyncio.create_task(hold("second"))  # waits in line
        await asyncio.sleep(0)
        assert (gate.active, gate.waiting) == (1, 1)
        with pytest.raises(Overloaded) as refused:
            async with gate.slot():
                pass
        assert refused.value.status == 429 and refused.value.headers["Retry-After"] == "1"
        release.set()
        await asyncio.gather(first, second)
        return order, gate

    order, gate = asyncio.run(scenario())
    assert order == ["first", "second"]
    assert (gate.active, gate.waiting, gate.refused) == (0, 0, 1)


def test_a_cancelled_waiter_leaves_its_place():
    async def scenario() -> Gate:
        gate = Gate("cnn", concurrency=1, queue=2)
        release = asyncio.Event()

        async def hold() -> None:
            async with gate.slot():
                await release.wait()

        holder = asyncio.create_task(hold())
        await asyncio.sleep(0)
        waiter = asyncio.create_task(hold())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        assert gate.waiting == 0
        release.set()
        await holder
        return gate

    gate = asyncio.run(scenario())
    assert (gate.active, gate.waiting) == (0, 0)


def test_slots_of_several_kinds_are_all_released():
    async def scenario() -> Admission:
        admission = Admission([Gate("parse", 1, 0), Gate("cnn", 1, 0)])
        async with admission.slots("parse", "cnn"):
            assert admission.gates["parse"].active == admission.gates["cnn"].active == 1
        return admission

    admission = asyncio.run(scenario())
    assert all(g.active == 0 for g in admission.gates.values())


def test_a_route_takes_the_slots_its_declaration_and_its_request_ask_for():
    """``slots_for`` reads the route's ``declare_work``: the kinds it always takes, and
    those its parameters ask for — a value the route read over the query string's."""
    route = SimpleNamespace(openapi_extra=declare_work(cnn=(), parse=("plus", "captions")))

    def taken(query: bytes, cached: bool = False, **read: object) -> set[str]:
        async def scenario() -> set[str]:
            admission = Admission([Gate("parse", 1, 0), Gate("cnn", 1, 0)])
            request = Request({"type": "http", "query_string": query, "route": route})
            async with admission.slots_for(request, cached, **read):
                return {kind for kind, gate in admission.gates.items() if gate.active}

        return asyncio.run(scenario())

    assert taken(b"") == {"cnn"}
    assert taken(b"plus=snow") == {"cnn", "parse"}
    assert taken(b"plus=false") == {"cnn"}
    assert taken(b"", captions=["a dog"]) == {"cnn", "parse"}
    assert taken(b"plus=snow", plus=[]) == {"cnn"}  # what the route read wins
    assert taken(b"plus=snow", cached=True) == {"cnn"}  # a cached query needs no parse


def test_a_full_server_answers_429_with_retry_after(service_components):
    """One photo in the backbone, none waiting: a second photo is refused at once, with
    the refusal counted in /metrics; the first is answered."""
    gallery = service_components.gallery
    data = gallery.photo_path(gallery.image_ids()[0]).read_bytes()
    settings = service_components.settings.model_copy(update={"cnn_concurrency": 1, "cnn_queue": 0})
    entered, leave = threading.Event(), threading.Event()

    def slow_describe(*args, **kwargs):
        entered.set()
        leave.wait(30)
        return describe(*args, **kwargs)

    with TestClient(create_app(settings, service_components)) as client:
        describe = client.app.state.capabilities.describe.run
        client.app.state.capabilities.describe.run = slow_describe
        try:
            results: list[int] = []
            first = threading.Thread(
                target=lambda: results.append(
                    client.post("/describe", files={"image": ("a.jpg", data)}).status_code
                )
            )
            first.start()
            assert entered.wait(30)
            refused = client.post("/describe", files={"image": ("b.jpg", data)})
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["type"] == "/problems/overloaded"
            assert 'groundsearch_in_flight{kind="cnn"} 1.0' in client.get("/metrics").text
            # text work has its own gate: a search still goes through
            assert client.post("/search", params={"text": "a dog"}).status_code == 200
            leave.set()
            first.join(30)
            assert results == [200]
            metrics = client.get("/metrics").text
            assert 'groundsearch_refused_total{kind="cnn"} 1.0' in metrics
            assert 'groundsearch_in_flight{kind="cnn"} 0.0' in metrics
        finally:
            leave.set()


def test_every_route_that_parses_or_runs_the_cnn_is_refused_before_its_body_is_read(
    service_components,
):
    """Each gate full: every route that takes a slot declares its work, and a request
    that needs that work is answered 429 before routing — a malformed upload included
    (read, it would be a 422) — while one that does not need it goes through."""
    settings = service_components.settings.model_copy(update={"parse_queue": 0, "cnn_queue": 0})
    app = create_app(settings, service_components)
    work = declared_work(app.routes)
    declared = {w.route.path for w in work}
    for route in iter_route_contexts(app.routes):
        source = inspect.getsource(route.endpoint) if route.endpoint is not None else ""
        # a route takes the slots it declares, never others of its own
        assert "admission.slots(" not in source, f"{route.path} names its slots itself"
        if "admission.slots_for(" in source:
            assert route.path in declared, f"{route.path} takes slots but declares no work"
    assert {"/search/image", "/paraphrase", "/images/{image_id}/describe"} <= declared
    assert len(declared) == 9  # every route that parses or runs the CNN
    with TestClient(app) as client:
        gates = app.state.admission.gates
        for w in work:
            method, path = next(iter(w.route.methods)), w.route.path.format(image_id=1)
            malformed = {"content": b"--x", "headers": {"content-type": "multipart/form-data"}}
            for kind, params in w.kinds.items():
                gates[kind].active = gates[kind].concurrency  # every slot taken, no line
                try:
                    query = {params[0]: "true"} if params else {}
                    answer = client.request(
                        method, path, params=query, **(malformed if w.upload else {})
                    )
                finally:
                    gates[kind].active = 0
                assert answer.status_code == 429, (path, kind, answer.status_code)
                assert answer.json()["type"] == "/problems/overloaded"
        # without the parameters that make it parse, an arithmetic takes no parse slot
        gates["parse"].active = gates["parse"].concurrency
        try:
            plain = client.post("/arithmetic", params={"image_id": 1, "sentence": "false"})
        finally:
            gates["parse"].active = 0
        assert plain.status_code == 200, plain.text


def test_the_early_refusal_lets_a_text_through_that_its_route_declares_cached():
    """With the parse line full, a route's ``cached_by`` text whose vector is cached is
    let through; another text, or the same on a route that declares none, is refused."""
    from fastapi import FastAPI

    from groundsearch.service.http.admission import EarlyRefusal

    app = FastAPI()

    @app.post("/find", openapi_extra=declare_work(parse=(), cached_by="q"))
    def find(q: str) -> dict[str, str]:
        return {"found": q}

    @app.post("/plain", openapi_extra=declare_work(parse=()))
    def plain(q: str) -> dict[str, str]:
        return {"found": q}

    gate = Gate("parse", concurrency=1, queue=0)
    gate.active = 1  # the line is full
    admission = Admission([gate])
    search = SimpleNamespace(clean=str.strip, is_cached=lambda text: text == "a dog")
    app.state.capabilities = SimpleNamespace(search=search)
    app.add_middleware(EarlyRefusal, admission=admission, work=declared_work(app.routes))
    with TestClient(app) as client:
        assert client.post("/find", params={"q": "a dog"}).json() == {"found": "a dog"}
        assert client.post("/find", params={"q": "a cat"}).status_code == 429
        assert client.post("/plain", params={"q": "a dog"}).status_code == 429
    assert gate.refused == 2
