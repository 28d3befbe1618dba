"""Prometheus metrics (latency per route and stage, admission, gallery sizes), a registry
per app."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from groundsearch.service.http.admission import Gate

C = TypeVar("C", Gauge, Counter)
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
        self.items = self._add(Gauge, "gallery_items", "Items in the gallery's stores.", "store")
        self.refused = self._add(
            Counter,
            "refused",
            "Requests refused (429) because the waiting line of their kind of work was full.",
        )
        self.queue_depth = self._add(
            Gauge, "queue_depth", "Requests waiting for a slot, by kind of work."
        )
        self.in_flight = self._add(Gauge, "in_flight", "Requests holding a slot, by kind of work.")
        self._refused_seen: dict[str, int] = {}
        self._front_seen: dict[str, int] = {}

    def _add(self, kind: type[C], name: str, doc: str, label: str = "kind") -> C:
        return kind(f"groundsearch_{name}", doc, [label], registry=self.registry)

    def observe_gate(self, gate: Gate) -> None:
        """A gate's counters changed (its ``on_change``)."""
        self.queue_depth.labels(gate.kind).set(gate.waiting)
        self.in_flight.labels(gate.kind).set(gate.active)
        self._count_refused(self._refused_seen, gate.kind, gate.refused)

    def observe_front(self, totals: Mapping[str, int]) -> None:
        """The front process's refusals so far, by kind (``front.report``): counted with
        the app's own."""
        for kind, total in totals.items():
            self._count_refused(self._front_seen, kind, int(total))

    def _count_refused(self, seen: dict[str, int], kind: str, total: int) -> None:
        """A running total of refusals → the counter's increment since it was last seen."""
        if (new := total - seen.get(kind, 0)) > 0:
            self.refused.labels(kind).inc(new)
            seen[kind] = total

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
