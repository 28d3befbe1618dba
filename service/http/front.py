"""The front: a small process ahead of the app that answers its refusals (429) at once.

Under overload a refusal the app answers waits behind the work it admitted (its GIL and
cores: 31 ms at p99 on 2 cores against ~10 ms), so ``groundsearch serve`` listens here: a
process with no model and no threads reads each request's head, refuses what the app's
admission gates would refuse, and passes everything else to the app on a Unix socket
(docs/BENCHMARKS.md, "Refusals under load"). It keeps the gates' books itself (``Spec``,
from ``admission.front_spec``): a request is *held* from being passed on until its answer
has gone back; a text whose answer it has seen (the query cache) is always passed on.
What it does not follow (a chunked or ``Expect`` body, ``HEAD``, an upgrade, a pipelined
request, a body) it passes on untouched, to the app's own admission.

Run by ``serve`` (``start_front``): the listening socket is inherited (``--fd``), the app's
is a Unix one (``--backend``; ``@``: abstract), the spec is the first line of standard
input, and the front ends quietly when that input closes; Ctrl-C is left to the parent.
Its refusals by kind go back on standard output (``report``), for the app's ``/metrics``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import math
import os
import signal
import socket
import sys
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: Query values that do not ask for the work a parameter names (as admission's).
_OFF = {"", "0", "false", "no", "off"}
MAX_HEAD = 64 * 1024
CHUNK = 64 * 1024
#: Headers after which the front no longer follows a connection (passes it on untouched).
_UNFOLLOWED = (b"transfer-encoding", b"expect", b"upgrade")
#: How often the front reports its refusals (when they changed).
REPORT_S = 1.0


@dataclass
class Route:
    """A route that declares work (``admission.RouteWork``, as plain data)."""

    regex: Any  # re.Pattern[str]
    methods: frozenset[str]
    kinds: dict[str, tuple[str, ...]]
    cached_by: str | None

    def needs(self, query: dict[str, list[str]]) -> tuple[str, ...]:
        def asks(param: str) -> bool:
            return any(v.lower() not in _OFF for v in query.get(param, []))

        return tuple(k for k, ps in self.kinds.items() if not ps or any(map(asks, ps)))


@dataclass
class Book:
    """A gate's books: its slots, its line, and the requests the front holds of its kind."""

    kind: str
    concurrency: int
    queue: int
    seconds_per_request: float
    held: int = 0
    refused: int = 0

    def refusal(self) -> int:
        """0 when there is room; else the ``Retry-After`` seconds (as ``Gate``'s)."""
        if self.held < self.concurrency + self.queue:
            return 0
        return max(1, math.ceil(self.held * self.seconds_per_request / max(self.concurrency, 1)))


@dataclass
class Spec:
    routes: list[Route]
    books: dict[str, Book]
    #: Texts whose answers were seen, kept as many as the app's query cache.
    cache_size: int = 4096
    answered: OrderedDict[str, None] = field(default_factory=OrderedDict)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Spec:
        import re

        routes = [
            Route(
                re.compile(r["regex"]),
                frozenset(r["methods"]),
                {k: tuple(p) for k, p in r["kinds"].items()},
                r.get("cached_by"),
            )
            for r in data["routes"]
        ]
        books = {g["kind"]: Book(**g) for g in data["gates"]}
        return cls(routes, books, int(data.get("cache_size", 4096)))

    def work(self, method: str, target: str) -> tuple[tuple[str, ...], str | None, str]:
        """(the kinds of work a request takes, its ``cached_by`` text, its path)."""
        parts = urlsplit(target)
        for route in self.routes:
            if method in route.methods and route.regex.match(parts.path):
                query = parse_qs(parts.query, keep_blank_values=True)
                texts = query.get(route.cached_by, []) if route.cached_by else []
                return route.needs(query), (texts[0] if texts else None), parts.path
        return (), None, parts.path

    def refusal(self, kinds: tuple[str, ...], text: str | None) -> tuple[str, int] | None:
        """(the full kind, Retry-After) when the app would refuse; None: pass it on."""
        if text is not None and text in self.answered:
            self.answered.move_to_end(text)
            return None
        for kind in sorted(kinds):  # the order the app takes its slots in
            if kind in self.books and (seconds := self.books[kind].refusal()):
                return kind, seconds
        return None

    def hold(self, kinds: tuple[str, ...]) -> None:
        for kind in kinds:
            if kind in self.books:
                self.books[kind].held += 1

    def release(self, kinds: tuple[str, ...], text: str | None, status: int) -> None:
        for kind in kinds:
            if kind in self.books:
                self.books[kind].held -= 1
        if text is not None and 200 <= status < 300 and self.cache_size:
            self.answered[text] = None
            self.answered.move_to_end(text)
            while len(self.answered) > self.cache_size:
                self.answered.popitem(last=False)


def problem_answer(
    status: int, reason: str, slug: str, detail: str, path: str, **headers: str
) -> bytes:
    """An HTTP/1.1 answer with a Problem body, shaped as the app's (problems.problem)."""
    body = json.dumps(
        {
            "type": f"/problems/{slug}",
            "title": slug.replace("-", " ").capitalize(),
            "status": status,
            "detail": detail,
            "instance": path,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()
    lines = [
        f"HTTP/1.1 {status} {reason}",
        f"content-length: {len(body)}",
        "content-type: application/problem+json",
        *(f"{k.replace('_', '-')}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


@functools.lru_cache(maxsize=256)
def overloaded(kind: str, seconds: int, path: str) -> bytes:
    """The app's 429 (``admission.Overloaded``), made once for each kind, wait and path."""
    detail = f"the server is busy ({kind} work queue full): retry in {seconds} s"
    return problem_answer(
        429, "Too Many Requests", "overloaded", detail, path, retry_after=str(seconds)
    )


@dataclass
class Pending:
    """A request passed on whose answer has not gone back yet."""

    kinds: tuple[str, ...]
    text: str | None
    status: int = 0


class Connection:
    """One client connection and its own connection to the app."""

    def __init__(
        self, spec: Spec, backend: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.spec, self.backend = spec, backend
        self.reader, self.writer = reader, writer
        self.app: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.pending: deque[Pending] = deque()
        self.following = True  # False: the bytes pass untouched (tunnel)
        self.answers: asyncio.Task[None] | None = None

    async def run(self) -> None:
        buf = bytearray()
        try:
            while True:
                if not self.following:
                    if buf:
                        await self._to_app(bytes(buf))
                        buf.clear()
                    data = await self.reader.read(CHUNK)
                    if not data:
                        return
                    await self._to_app(data)
                    continue
                end = buf.find(b"\r\n\r\n")
                while end < 0:
                    if len(buf) > MAX_HEAD:
                        self.following = False
                        break
                    data = await self.reader.read(CHUNK)
                    if not data:
                        return
                    buf += data
                    end = buf.find(b"\r\n\r\n")
                if end < 0:
                    continue
                head = bytes(buf[: end + 4])
                del buf[: end + 4]
                if not await self._request(head, buf):
                    return
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            return
        finally:
            await self._close()

    async def _request(self, head: bytes, buf: bytearray) -> bool:
        """Refuse or pass on one request (its body starts in ``buf``); False: closed."""
        lines = head.split(b"\r\n")
        try:
            method, target, _ = lines[0].decode("latin-1").split(" ", 2)
        except ValueError:
            method = target = ""
        length, follow = 0, bool(method) and method not in ("HEAD", "CONNECT")
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    follow = False
            elif name in _UNFOLLOWED:
                follow = False
        if not follow:  # passed on as it is; the app follows it from here
            self.following = False
            await self._to_app(head)
            return True
        kinds, text, path = self.spec.work(method, target)
        if kinds and length == 0 and not self.pending:
            refusal = self.spec.refusal(kinds, text)
            if refusal is not None:
                kind, seconds = refusal
                self.spec.books[kind].refused += 1
                self.writer.write(overloaded(kind, seconds, path))
                await self.writer.drain()
                return True
        pending = Pending(kinds, text)
        self.spec.hold(kinds)  # before any wait: the next request's check counts this one
        self.pending.append(pending)
        if self.app is None and not await self._connect(path):
            return False  # released by _close
        body = bytes(buf[:length])
        del buf[:length]
        await self._to_app(head + body)
        left = length - len(body)
        while left > 0:
            data = await self.reader.read(min(CHUNK, left))
            if not data:
                return False
            left -= len(data)
            await self._to_app(data)
        return True

    async def _connect(self, path: str) -> bool:
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:  # connected here: uvloop's own connect takes no abstract name
                await asyncio.get_running_loop().sock_connect(sock, _address(self.backend))
            except OSError:
                sock.close()
                raise
            self.app = await asyncio.open_unix_connection(sock=sock)
        except OSError:
            detail = "the server is starting or stopping: retry in 1 s"
            answer = problem_answer(
                503, "Service Unavailable", "unavailable", detail, path, retry_after="1"
            )
            self.writer.write(answer)
            with contextlib.suppress(ConnectionError, OSError):
                await self.writer.drain()
            return False
        self.answers = asyncio.create_task(self._pass_answers())
        return True

    async def _to_app(self, data: bytes) -> None:
        if self.app is None and not await self._connect("/"):
            raise ConnectionError("no app")
        assert self.app is not None
        self.app[1].write(data)
        await self.app[1].drain()

    async def _pass_answers(self) -> None:
        """The app's answers back to the client as they come, each one's end noted."""
        import httptools

        assert self.app is not None
        reader, pending, spec = self.app[0], self.pending, self.spec

        class Answers:
            def on_headers_complete(self) -> None:
                if pending:
                    pending[0].status = parser.get_status_code()

            def on_message_complete(self) -> None:
                if pending:
                    done = pending.popleft()
                    spec.release(done.kinds, done.text, done.status)

        parser = httptools.HttpResponseParser(Answers())
        try:
            while data := await reader.read(CHUNK):
                if self.following and pending:
                    try:
                        parser.feed_data(data)
                    except httptools.HttpParserError:
                        self.following = False
                self.writer.write(data)
                await self.writer.drain()
        except (ConnectionError, OSError):
            pass
        if pending or not self.following:
            self.writer.close()  # an answer cut short: the client must know
        else:  # the app closed an idle connection: the next request opens another
            self.app[1].close()
            self.app = None

    async def _close(self) -> None:
        while self.pending:  # answers that will not come back
            done = self.pending.popleft()
            self.spec.release(done.kinds, None, 0)
        if self.app is not None:
            self.app[1].close()
        if self.answers is not None:
            self.answers.cancel()
            with contextlib.suppress(asyncio.CancelledError, ConnectionError, OSError):
                await self.answers
        self.writer.close()


def _address(name: str) -> str:
    """A Unix socket's address: ``@NAME`` is Linux's abstract ``\\0NAME``."""
    return "\0" + name[1:] if name.startswith("@") else name


def start_front(sock: socket.socket, spec: dict[str, Any]) -> tuple[Any, socket.socket]:
    """Start the front on ``sock`` (then closed here); (its process, the app's socket)."""
    import subprocess

    app = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"@groundsearch-{os.getpid()}-{os.urandom(6).hex()}"
    app.bind(_address(name))
    app.listen(2048)
    front = subprocess.Popen(
        [sys.executable, "-m", __name__, "--fd", str(sock.fileno()), "--backend", name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,  # its refusals (``report``): ``follow_reports`` reads them
        pass_fds=(sock.fileno(),),
    )
    sock.close()  # the front's now
    assert front.stdin is not None
    front.stdin.write(json.dumps(spec).encode() + b"\n")
    front.stdin.flush()  # kept open: its end tells the front to end
    return front, app


def stop_front(front: Any, timeout: float = 5.0) -> None:
    """End the front (its input closed), killed if it has not within ``timeout``."""
    with contextlib.suppress(OSError):
        front.stdin.close()
    try:
        front.wait(timeout)
    except Exception:
        front.kill()
        front.wait()


async def report(books: dict[str, Book], out: Any, every: float = REPORT_S) -> None:
    """Write the refusal totals by kind as a JSON line to ``out`` (binary) whenever they
    change, until cancelled or ``out`` is closed."""
    seen: dict[str, int] = {}
    while True:
        totals = {kind: book.refused for kind, book in books.items()}
        if totals != seen:
            try:
                out.write(json.dumps(totals).encode() + b"\n")
                out.flush()
            except (OSError, ValueError):  # the app is gone: nobody to tell
                return
            seen = totals
        await asyncio.sleep(every)


def follow_reports(stream: Any, observe: Any) -> None:
    """Pass each of the front's reports on ``stream`` to ``observe`` (its totals by kind),
    until the stream ends (run on a thread of the app's process)."""
    for line in stream:
        with contextlib.suppress(ValueError):
            observe(json.loads(line))


async def serve(
    sock: socket.socket,
    backend: str,
    spec: Spec,
    out: Any = None,
    every: float = REPORT_S,
    watch: bool = True,
) -> None:
    """Accept on ``sock`` until standard input closes (the parent gone) or SIGTERM (with
    ``watch``; else until cancelled); the refusals reported to ``out`` (default: standard
    output)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def stop() -> None:
        if not done.done():
            done.set_result(None)

    connections: set[asyncio.Task[Any]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        with contextlib.suppress(Exception):
            writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await Connection(spec, backend, reader, writer).run()
        except asyncio.CancelledError:  # the front stopping: the connection ends with it
            pass
        finally:
            connections.discard(task)

    if watch:
        loop.add_signal_handler(signal.SIGTERM, stop)
        loop.add_reader(sys.stdin.fileno(), lambda: stop() if not os.read(0, 1024) else None)
    server = await asyncio.start_server(handle, sock=sock, backlog=2048)
    reports = asyncio.create_task(report(spec.books, out or sys.stdout.buffer, every))
    try:
        await done
    finally:
        reports.cancel()
        server.close()
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="groundsearch's front process (started by serve)")
    p.add_argument("--fd", type=int, required=True, help="the listening socket, inherited")
    p.add_argument("--backend", required=True, help="the app's Unix socket ('@': abstract)")
    args = p.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the parent stops, then this
    line = sys.stdin.buffer.readline()  # the spec (JSON); then EOF when the parent ends
    if not line:
        return 0
    spec = Spec.from_json(json.loads(line))
    sock = socket.socket(fileno=args.fd)
    try:
        import uvloop

        uvloop.run(serve(sock, args.backend, spec))
    except ImportError:
        asyncio.run(serve(sock, args.backend, spec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
