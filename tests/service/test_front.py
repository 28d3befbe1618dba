"""The front process's books (``service.http.front``): what the app's gates would refuse is
answered 429 at once, the rest passed on, and its refusals reach the app's ``/metrics``."""

from __future__ import annotations

import asyncio
import io
import json
import socket

from prometheus_client.parser import text_string_to_metric_families

from groundsearch.service.http.front import Spec, follow_reports, serve
from groundsearch.service.http.metrics import Metrics

#: /search takes a parse slot; one slot, no waiting line.
SPEC = {
    "routes": [{"regex": "^/search$", "methods": ["POST"], "kinds": {"parse": []}}],
    "gates": [{"kind": "parse", "concurrency": 1, "queue": 0, "seconds_per_request": 0.05}],
    "cache_size": 16,
}


def refused(metrics: Metrics) -> dict[str, float]:
    families = text_string_to_metric_families(metrics.render().decode())
    return {
        s.labels["kind"]: s.value
        for f in families
        if f.name == "groundsearch_refused"
        for s in f.samples
        if s.name == "groundsearch_refused_total"
    }


async def _request(port: int, path: str) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n".encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    writer.close()
    return head


def test_the_front_refuses_a_full_gate_at_once_and_reports_it(tmp_path):
    async def scenario() -> tuple[bytes, bytes, bytes, list[dict[str, int]]]:
        release = asyncio.Event()

        async def app(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            head = await reader.readuntil(b"\r\n\r\n")
            if head.startswith(b"POST /search"):
                await release.wait()  # the admitted search holds its slot until released
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
            await writer.drain()
            await reader.read()

        backend = str(tmp_path / "app.sock")
        app_server = await asyncio.start_unix_server(app, backend)
        listening = socket.create_server(("127.0.0.1", 0))
        port = listening.getsockname()[1]
        out = io.BytesIO()
        front = asyncio.create_task(
            serve(listening, backend, Spec.from_json(SPEC), out, every=0.01, watch=False)
        )
        admitted = asyncio.create_task(_request(port, "/search?text=a+dog"))
        await asyncio.sleep(0.2)  # the first request holds the only slot
        refusal = await asyncio.wait_for(_request(port, "/search?text=a+cat"), 2)
        other = await asyncio.wait_for(_request(port, "/health"), 2)  # no work: passed on
        release.set()
        first = await asyncio.wait_for(admitted, 5)
        await asyncio.sleep(0.05)
        front.cancel()
        await asyncio.gather(front, return_exceptions=True)
        app_server.close()
        reports = [json.loads(line) for line in out.getvalue().splitlines()]
        return first, refusal, other, reports

    first, refusal, other, reports = asyncio.run(scenario())
    assert refusal.startswith(b"HTTP/1.1 429") and b"retry-after: 1" in refusal.lower()
    assert first.startswith(b"HTTP/1.1 200") and other.startswith(b"HTTP/1.1 200")
    assert reports[0] == {"parse": 0} and reports[-1] == {"parse": 1}

    metrics = Metrics()
    follow_reports(
        io.BytesIO(b"".join(json.dumps(r).encode() + b"\n" for r in reports)), metrics.observe_front
    )
    assert refused(metrics) == {"parse": 1.0}
    metrics.observe_front({"parse": 3})  # totals: only what is new is counted
    metrics.observe_front({"parse": 3})
    assert refused(metrics) == {"parse": 3.0}
