"""Parsers in processes of their own, one per core (stanza's small operations hold the
GIL); ``parse_in_processes`` shares a corpus's chunks among several."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path

from groundsearch.model.runtime import sentences
from groundsearch.model.runtime.parsing.parser import ParseError, Parser
from groundsearch.model.runtime.parsing.tree import DependencyTree

#: A text's result: its tree, or the error that says why it has none.
Outcome = DependencyTree | BaseException
#: Set by ``stop_all``: no parser process starts or restarts any more (a server stopping).
_stopping = threading.Event()
_live: weakref.WeakSet[ParserProcess] = weakref.WeakSet()


def stop_all(final: bool = True) -> None:
    """End every parser process of this process now (SIGKILL: they hold nothing to save);
    none restarts, and with ``final`` none starts from here on (a server stopping ends
    them without waiting, and nothing their end cuts short starts another)."""
    if final:
        _stopping.set()
    for proc in list(_live):
        proc.stopped = True
        proc.kill()


def _stopped() -> RuntimeError:
    return RuntimeError("the parser processes were stopped (the server is stopping)")


def parse_each(parser: Parser, texts: Sequence[str]) -> list[DependencyTree | ParseError]:
    """One batch; if a text spoils it, each text alone, so only that one fails."""
    return sentences.parse_each(parser.parse, texts)


class ParserProcess:
    """A parser in a spawned child process (restarted if it dies), loaded before it says
    it is ready: batches of texts in through a pipe, one outcome per text back.
    ``niceness``: added to the making thread's (a server's event loop runs first)."""

    def __init__(
        self,
        parser_dir: Path,
        cache_dir: Path,
        direct: bool = True,
        warm_words: int = 0,
        niceness: int = 0,
    ) -> None:
        self.parser_dir, self.cache_dir = Path(parser_dir), Path(cache_dir)
        self.direct, self.warm_words = direct, warm_words
        self.nice = _nicer(niceness)
        self.stopped = False  # set by stop_all: no restart
        self._start()

    def _start(self) -> None:
        if _stopping.is_set():
            raise _stopped()
        _live.add(self)
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_child_main,
            args=(child, self.parser_dir, self.cache_dir, self.direct, self.warm_words, self.nice),
            name="groundsearch-parser",
            daemon=True,
        )
        self.process.start()
        child.close()
        if _stopping.is_set():  # stop_all came while it started
            self.kill()
            raise _stopped()
        ready = None
        with contextlib.suppress(EOFError):
            ready = self.conn.recv()
        if ready != "ready":
            self.process.join(timeout=5)
            if self.stopped or _stopping.is_set():
                raise _stopped()
            raise RuntimeError(
                f"the parser process exited before it was ready (exit code "
                f"{self.process.exitcode}); see the lines above for its error"
            )

    def parse(self, texts: Sequence[str]) -> list[Outcome]:
        """One outcome per text, in order; if the process died, a RuntimeError for each
        text of this batch and a new process for the next."""
        try:
            self.conn.send(list(texts))
            answers = self.conn.recv()
        except (EOFError, OSError) as exc:
            self.process.join(timeout=1)
            if self.stopped or _stopping.is_set():
                return [_stopped()] * len(texts)
            self._start()
            return [RuntimeError(f"the parser process died ({exc})")] * len(texts)
        return [DependencyTree.from_dict(a) if ok else ParseError(a) for ok, a in answers]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(timeout=1)  # niced, on a busy machine its exit can take long:
        self.kill()  # it holds nothing to save

    def kill(self) -> None:
        """End the process now (a no-op once it has ended)."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            if self.process.is_alive():
                self.process.kill()
                self.process.join(timeout=5)


def _nicer(niceness: int) -> int | None:
    """The niceness ``niceness`` above the calling thread's (None: unchanged, or unknown)."""
    if not niceness:
        return None
    try:
        return min(19, os.getpriority(os.PRIO_PROCESS, 0) + niceness)
    except (OSError, AttributeError):
        return None


def _child_main(
    conn: Connection,
    parser_dir: str | Path,
    cache_dir: str | Path,
    direct: bool,
    warm_words: int,
    nice: int | None = None,
) -> None:
    """A parser process: batches of texts in, ``(ok, tree dict | message)`` pairs out.
    It leaves Ctrl-C and SIGTERM to its parent (``close``, ``stop_all``: sent to the
    process group they would end it mid-parse) and ends quietly once the parent is gone.
    ``nice``: its niceness, set first so that torch's threads have it too."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    if nice is not None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    try:
        _serve_parses(conn, parser_dir, cache_dir, direct, warm_words)
    except (BrokenPipeError, ConnectionResetError, EOFError):
        return  # the parent closed its end


def _serve_parses(
    conn: Connection, parser_dir: str | Path, cache_dir: str | Path, direct: bool, warm_words: int
) -> None:
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    threadpool_limits(1, user_api="blas")  # numpy's too: one query's small arrays
    parser = Parser(Path(parser_dir), Path(cache_dir), use_cache=False, direct=direct)
    parser.warm(warm_words)  # load the models (and common words) before saying ready
    parser.parse(["A dog runs on the beach ."])
    conn.send("ready")
    while (texts := conn.recv()) is not None:
        conn.send(
            [
                (False, str(o)) if isinstance(o, ParseError) else (True, o.to_dict())
                for o in parse_each(parser, texts)
            ]
        )


def parse_in_processes(
    texts: Sequence[str],
    parser_dir: Path,
    cache_dir: Path,
    workers: int,
    chunk: int = 500,
    direct: bool = True,
) -> list[DependencyTree]:
    """Trees of ``texts`` (already cleaned), in order, parsed by ``workers`` processes;
    ParseError naming the first text that cannot be parsed."""
    chunks = [list(texts[i : i + chunk]) for i in range(0, len(texts), chunk)]
    if not chunks:
        return []
    idle: queue.Queue[ParserProcess] = queue.Queue()

    def run(part: list[str]) -> list[Outcome]:
        proc = idle.get()
        try:
            return proc.parse(part)
        finally:
            idle.put(proc)

    n = max(1, min(workers, len(chunks)))
    with ThreadPoolExecutor(n) as pool:  # the processes load their models side by side
        starts = [pool.submit(ParserProcess, parser_dir, cache_dir, direct) for _ in range(n)]
        procs = [s.result() for s in starts if s.exception() is None]
        try:
            if failed := [e for s in starts if (e := s.exception()) is not None]:
                raise failed[0]
            for proc in procs:
                idle.put(proc)
            outcomes = [o for part in pool.map(run, chunks) for o in part]
        finally:
            for proc in procs:
                proc.close()
    trees: list[DependencyTree] = []
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, BaseException):
            raise ParseError(f"text {i}: {outcome}")
        trees.append(outcome)
    return trees
