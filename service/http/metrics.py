"""Prometheus metrics: request latency per route, time per stage, admission per kind of
work, gallery sizes; each app has its own registry."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from groundsearch.service.http.admission import Gate

BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """The service's collectors, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Histogram(
            "groundsearch_request_seconds",
            "Request latency by route template, method and status.",
            ["route", "method", "status"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.stages = Histogram(
            "groundsearch_stage_seconds",
            "Time spent in each stage (parse, encode, cnn, search, generate, rerank).",
            ["stage"],
            buckets=BUCKETS,
            registry=self.registry,
        )
        self.items = Gauge(
            "groundsearch_gallery_items",
            "Items in the gallery's stores.",
            ["store"],
            registry=self.registry,
        )

        self.refused = Counter(
            "groundsearch_refused",
            "Requests refused (429) because the waiting line of their kind of work was full.",
            ["kind"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "groundsearch_queue_depth",
            "Requests waiting for a slot, by kind of work.",
            ["kind"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "groundsearch_in_flight",
            "Requests holding a slot, by kind of work.",
            ["kind"],
            registry=self.registry,
        )
        self._refused_seen: dict[str, int] = {}

    def observe_gate(self, gate: Gate) -> None:
        """A gate's counters changed (its ``on_change``)."""
        self.queue_depth.labels(gate.kind).set(gate.waiting)
        self.in_flight.labels(gate.kind).set(gate.active)
        new = gate.refused - self._refused_seen.get(gate.kind, 0)
        if new:
            self.refused.labels(gate.kind).inc(new)
            self._refused_seen[gate.kind] = gate.refused

    def observe_stage(self, stage: str, seconds: float) -> None:
        self.stages.labels(stage).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsMiddleware:
    """ASGI middleware timing every request under its route template."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            name = getattr(scope.get("route"), "path", None) or "<unmatched>"
            self.metrics.requests.labels(name, scope["method"], str(status)).observe(
                time.perf_counter() - start
            )
