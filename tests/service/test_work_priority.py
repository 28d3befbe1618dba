"""The event loop runs before the work it admitted: a query's work runs on niced text
threads, the parse on niced threads and processes, and a refusal is answered while the
admitted work holds its slot (docs/BENCHMARKS.md, "Overload", measures the effect)."""

from __future__ import annotations

import os
import sys
import threading

import pytest
from fastapi.testclient import TestClient

from groundsearch.service.core.batching import ParseBatcher
from groundsearch.service.core.work_threads import NICENESS, TEXT_PREFIX
from groundsearch.service.http.app import create_app

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="niceness per thread is Linux's (setpriority on a tid)"
)


def niceness(tid: int = 0) -> int:
    """A thread's niceness (0: the calling thread's)."""
    return os.getpriority(os.PRIO_PROCESS, tid)


def niced() -> int:
    """The niceness of work started by this thread (the event loop's: TestClient's loop
    thread is started by the test's, at the test's niceness)."""
    return min(19, niceness() + NICENESS)


def recording(calls: list[tuple[str, int]], fn):
    def call(*args, **kwargs):
        calls.append((threading.current_thread().name, niceness(threading.get_native_id())))
        return fn(*args, **kwargs)

    return call


def test_the_text_routes_run_their_work_on_niced_text_threads(service_components):
    """/search, /explain and /arithmetic with a phrase run on the text threads, niced
    below the event loop, not on the default thread pool (the event loop's niceness)."""
    with TestClient(create_app(service_components.settings, service_components)) as client:
        capabilities = client.app.state.capabilities
        calls: dict[str, list[tuple[str, int]]] = {"search": [], "explain": [], "arithmetic": []}
        for name, record in calls.items():
            capability = getattr(capabilities, name)
            capability.run = recording(record, capability.run)
        assert client.post("/search", params={"text": "a dog on the grass"}).status_code == 200
        assert client.get("/explain", params={"text": "a dog on the grass"}).status_code == 200
        image_id = service_components.gallery.image_ids()[0]
        answer = client.post("/arithmetic", params={"image_id": image_id, "plus": "snow"})
        assert answer.status_code == 200, answer.text
    for name, record in calls.items():
        assert len(record) == 1, (name, record)
        thread, nice = record[0]
        assert thread.startswith(TEXT_PREFIX), (name, thread)
        assert nice == niced(), (name, nice)


def test_a_refusal_is_answered_while_the_admitted_work_runs(service_components):
    """One query's work in flight on a text thread, no place in line: a second query is
    refused (429) while the first still runs, and the first is then answered."""
    settings = service_components.settings.model_copy(
        update={"parse_concurrency": 1, "parse_queue": 0}
    )
    entered, leave = threading.Event(), threading.Event()
    with TestClient(create_app(settings, service_components)) as client:
        search = client.app.state.capabilities.search
        run = search.run

        def held(*args, **kwargs):
            entered.set()
            leave.wait(30)
            return run(*args, **kwargs)

        search.run = held
        statuses: list[int] = []
        first = threading.Thread(
            target=lambda: statuses.append(
                client.post("/search", params={"text": "a cat on a sofa"}).status_code
            )
        )
        try:
            first.start()
            assert entered.wait(30)
            refused = client.post("/search", params={"text": "two birds in a tree"})
            assert refused.status_code == 429, refused.text
            assert not leave.is_set() and first.is_alive()  # answered while the work runs
        finally:
            leave.set()
            first.join(30)
    assert statuses == [200]


def test_the_parse_threads_are_niced(parser):
    """A server's batcher (Components.load(niceness=...)) parses on niced threads."""
    batcher = ParseBatcher(parser, workers=0, warm_words=0, niceness=NICENESS)
    try:
        assert batcher.outcomes(["A dog runs ."])[0].root.text == "runs"
        (thread,) = batcher._threads
        assert thread.native_id is not None
        assert niceness(thread.native_id) == niced()
    finally:
        batcher.close()


@pytest.mark.slow
def test_the_parser_processes_are_niced_and_stay_niced_when_restarted(parser):
    """A parser process is as nice as its batching thread, and so is the one started
    when it dies (started by that niced thread: the niceness is not added twice)."""
    batcher = ParseBatcher(parser, workers=1, warm_words=0, niceness=NICENESS)
    try:
        (thread,) = batcher._threads
        (process,) = batcher._backends
        assert process.process.pid is not None
        assert niceness(process.process.pid) == niced()
        assert thread.native_id is not None and niceness(thread.native_id) == niced()
        process.process.kill()
        process.process.join(10)
        failed = batcher.outcomes(["A dog runs ."])[0]  # the dead process's batch
        assert isinstance(failed, RuntimeError)
        assert batcher.outcomes(["A cat sleeps ."])[0].root.text == "sleeps"
        assert process.process.pid is not None and process.process.is_alive()
        assert niceness(process.process.pid) == niced()
    finally:
        batcher.close()
