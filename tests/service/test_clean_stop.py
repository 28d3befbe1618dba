"""A clean stop: ``groundsearch serve`` stopped by SIGTERM while it warms up and while it
answers ends within seconds with all its children (front, parser process, resource
tracker), and prints no traceback (issue 60: parser processes restarted or still warming
while the parent closed printed BrokenPipe tracebacks)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.service.real_server import Server, server_env, stop

pytestmark = [
    pytest.mark.slow,  # real servers in subprocesses
    pytest.mark.skipif(sys.platform != "linux", reason="the processes are read from /proc"),
]
#: Seconds the server may take to stop (a loaded 2-core machine: 0.2–5 s), and then the
#: processes it started to end (they end before it does: nothing is left to end later).
STOP_S = 10
GRACE_S = 2


def descendants(pid: int) -> set[int]:
    """The processes ``pid`` started, and theirs, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def terminate(server: Server) -> tuple[float, set[int]]:
    """SIGTERM the server: (seconds until it ended, the processes it had started still
    running GRACE_S after that)."""
    assert server.proc is not None
    started = descendants(server.proc.pid)
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        server.proc.wait(timeout=STOP_S)
    seconds = time.monotonic() - t0
    while time.monotonic() - t0 < seconds + GRACE_S and any(map(running, started)):
        time.sleep(0.05)
    left = {pid for pid in started if running(pid)}
    stop(server.proc)  # nothing left behind for the next test, whatever the outcome
    return seconds, left


def test_sigterm_while_warming_up_and_while_answering_ends_everything_quietly(
    service_gallery: Path, tmp_path: Path
):
    (tmp_path / "cache").mkdir()
    # a parser process: the child a stop must end (its warm-up a second or more)
    env = server_env(tmp_path / "cache", "clean-stop-write-token")
    env["GROUNDSEARCH_PARSE_WORKERS"] = "1"
    logs = [tmp_path / "warming.log", tmp_path / "answering.log"]
    # two servers started together: one stopped while it warms up, one once it answers
    # (that one sooner ready: no common words warmed)
    warming_server = Server(service_gallery, env, logs[0])
    server = Server(service_gallery, env | {"GROUNDSEARCH_PARSE_WARM_WORDS": "0"}, logs[1])
    warming_server.start()
    server.start()

    # 1. While warming up: the app answers /health, its parser process is starting.
    assert warming_server.proc is not None
    deadline = time.monotonic() + 120
    parsers: list[int] = []
    while time.monotonic() < deadline and warming_server.proc.poll() is None:
        children = descendants(warming_server.proc.pid)
        parsers = [p for p in children if "spawn_main" in cmdline(p)]
        if parsers:
            break
        time.sleep(0.05)
    assert parsers, f"no parser process started:\n{warming_server.tail()}"
    warming = httpx.get(warming_server.base + "/ready", timeout=5).status_code != 200
    seconds, left = terminate(warming_server)
    print(f"warming: stopped in {seconds:.2f} s")
    assert seconds < STOP_S, seconds
    assert not left, f"left running after the server: {[cmdline(p) for p in left]}"
    assert warming, "the server was ready before the stop: warm-up not tested"

    # 2. While answering: clients keep sending never-seen sentences as it stops.
    assert server.proc is not None
    server.ready()
    stop_sending = threading.Event()
    answers: list[int] = []

    def client(i: int) -> None:
        with httpx.Client(base_url=server.base, timeout=30) as http:
            n = 0
            while not stop_sending.is_set():
                n += 1
                try:
                    text = f"a dog number {i} runs after ball {n} on the grass"
                    answers.append(http.post("/search", params={"text": text}).status_code)
                except httpx.HTTPError:
                    answers.append(0)
                    time.sleep(0.05)

    clients = [threading.Thread(target=client, args=(i,)) for i in range(8)]
    for thread in clients:
        thread.start()
    while len(answers) < 20 and server.proc.poll() is None:
        time.sleep(0.02)
    seconds, left = terminate(server)
    print(f"answering: stopped in {seconds:.2f} s, {len(answers)} answers")
    stop_sending.set()
    for thread in clients:
        thread.join(timeout=30)
    assert seconds < STOP_S, seconds
    assert not left, f"left running after the server: {[cmdline(p) for p in left]}"
    assert 200 in answers

    for log in logs:
        text = log.read_text(errors="replace")
        for word in ("Traceback", "BrokenPipe"):
            assert word not in text, f"{log.name}:\n{text[-4000:]}"
