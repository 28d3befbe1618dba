"""Dynamic batching of parses: requests that wait together are parsed together.

The stanza pipeline serves one caller at a time, and one short sentence costs about as
much as several parsed in one batch (22 ms alone, 8 ms each in a batch of 8, one torch
thread). So request threads put their texts on a queue and wait; a batcher thread takes
everything queued (up to ``max_batch``) and parses it in one call. Idle, a query is
parsed alone, at once; under load, batches grow.

With ``workers`` ≥ 1 each batcher thread hands its batches to a parser in a process of
its own, so parsing runs on another core than the server's Python code (stanza's small
operations hold the GIL). With ``workers=0`` the parser of this process is used.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from multiprocessing.connection import Connection
from pathlib import Path

from model.parsing import ParseError, Parser
from model.parsing.tree import DependencyTree

Job = tuple[str, Future]


class ParseBatcher:
    """Parse texts from many threads through batching parser threads (or processes)."""

    def __init__(self, parser: Parser, max_batch: int = 16, workers: int = 0) -> None:
        self.parser, self.max_batch = parser, max_batch
        self._queue: queue.Queue[Job | None] = queue.Queue()
        backends = [_Local(parser)] if workers == 0 else [_Worker(parser) for _ in range(workers)]
        self._threads = [
            threading.Thread(target=self._run, args=(b,), name=f"parse-batcher-{i}", daemon=True)
            for i, b in enumerate(backends)
        ]
        for thread in self._threads:
            thread.start()

    def parse(self, texts: Sequence[str]) -> list[DependencyTree]:
        """Trees of (cleaned) texts, in order; ParseError naming the first bad text."""
        futures: list[Future[DependencyTree]] = []
        for text in texts:
            futures.append(Future())
            self._queue.put((text, futures[-1]))
        trees = []
        for i, future in enumerate(futures):
            try:
                trees.append(future.result())
            except ParseError as exc:
                raise ParseError(f"text {i}: {exc}" if len(texts) > 1 else str(exc)) from None
        return trees

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=10)

    def _run(self, backend: _Local | _Worker) -> None:
        try:
            while True:
                item = self._queue.get()
                if item is None:
                    return
                batch = [item]
                while len(batch) < self.max_batch:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if more is None:
                        self._queue.put(None)
                        break
                    batch.append(more)
                outcomes = backend.parse([text for text, _ in batch])
                for (_, future), outcome in zip(batch, outcomes, strict=True):
                    if isinstance(outcome, BaseException):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)
        finally:
            backend.close()


Outcome = DependencyTree | BaseException


def _parse_each(parser: Parser, texts: list[str]) -> list[DependencyTree | ParseError]:
    """One batch; if a text spoils it, each text alone, so only that one fails."""
    try:
        return list(parser.parse(texts))
    except ParseError:
        outcomes: list[DependencyTree | ParseError] = []
        for text in texts:
            try:
                outcomes.append(parser.parse([text])[0])
            except ParseError as exc:
                outcomes.append(exc)
        return outcomes


class _Local:
    """Batches parsed by this process's parser."""

    def __init__(self, parser: Parser) -> None:
        self.parser = parser

    def parse(self, texts: list[str]) -> list[Outcome]:
        try:
            return list(_parse_each(self.parser, texts))
        except Exception as exc:
            return [exc] * len(texts)

    def close(self) -> None:
        pass


class _Worker:
    """Batches parsed by a parser in a child process (restarted if it dies)."""

    def __init__(self, parser: Parser) -> None:
        self.parser_dir, self.cache_dir = parser.parser_dir, parser.cache_dir
        self._start()

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_worker_main,
            args=(child, str(self.parser_dir), str(self.cache_dir)),
            name="groundsearch-parser",
            daemon=True,
        )
        self.process.start()
        child.close()
        try:
            ready = self.conn.recv()
        except EOFError:
            ready = None
        if ready != "ready":
            self.process.join(timeout=5)
            raise RuntimeError(
                f"the parser process exited before it was ready (exit code "
                f"{self.process.exitcode}); see the lines above for its error"
            )

    def parse(self, texts: list[str]) -> list[Outcome]:
        try:
            self.conn.send(texts)
            answers = self.conn.recv()
        except (EOFError, OSError) as exc:  # the process died: start another
            self.process.join(timeout=1)
            self._start()
            return [RuntimeError(f"the parser process died ({exc})")] * len(texts)
        return [DependencyTree.from_dict(a) if ok else ParseError(a) for ok, a in answers]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()


def _worker_main(conn: Connection, parser_dir: str, cache_dir: str) -> None:
    """A parser process: batches of texts in, ``(ok, tree dict | message)`` pairs out."""
    import torch

    torch.set_num_threads(1)
    parser = Parser(Path(parser_dir), Path(cache_dir), use_cache=False)
    parser.parse(["A dog runs on the beach ."])  # load the pipeline before saying ready
    conn.send("ready")
    while True:
        try:
            texts = conn.recv()
        except EOFError:  # the server is gone
            return
        if texts is None:
            return
        conn.send(
            [
                (False, str(o)) if isinstance(o, ParseError) else (True, o.to_dict())
                for o in _parse_each(parser, texts)
            ]
        )
