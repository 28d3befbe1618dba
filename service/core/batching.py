"""Dynamic batching of parses: request threads queue their texts and a batcher thread
parses everything queued (up to ``max_batch``) in one call, in a parser process of its
own when ``workers`` ≥ 1 (stanza holds the GIL)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future

from groundsearch.model.runtime.parsing import DependencyTree, Parser
from groundsearch.model.runtime.parsing.pool import Outcome, ParserProcess, parse_each
from groundsearch.service.core.work_threads import lower_priority

Job = tuple[str, Future[DependencyTree]]


class ParseBatcher:
    """Parse texts from many threads through batching parser threads (or processes)."""

    def __init__(
        self,
        parser: Parser,
        max_batch: int = 16,
        workers: int = 0,
        warm_words: int = 0,
        niceness: int = 0,
    ) -> None:
        self.parser, self.max_batch, self.niceness = parser, max_batch, niceness
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._backends: list[_Local | ParserProcess]
        if workers:
            args = (parser.parser_dir, parser.cache_dir, parser.direct, warm_words, niceness)
            self._backends = [ParserProcess(*args) for _ in range(workers)]
        else:
            self._backends = [_Local(parser, warm_words)]
        self._threads = [
            threading.Thread(target=self._run, args=(b,), name=f"parse-batcher-{i}", daemon=True)
            for i, b in enumerate(self._backends)
        ]
        for thread in self._threads:
            thread.start()

    def outcomes(self, texts: Sequence[str]) -> list[Outcome]:
        """One outcome per cleaned text, in order: its tree or its ``ParseError``."""
        futures: list[Future[DependencyTree]] = []
        for text in texts:
            futures.append(Future())
            self._queue.put((text, futures[-1]))
        return [future.exception() or future.result() for future in futures]

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=10)

    def _run(self, backend: _Local | ParserProcess) -> None:
        lower_priority(self.niceness)
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


class _Local:
    """Batches parsed by this process's parser."""

    def __init__(self, parser: Parser, warm_words: int) -> None:
        self.parser = parser
        parser.warm(warm_words)

    def parse(self, texts: list[str]) -> list[Outcome]:
        try:
            return list(parse_each(self.parser, texts))
        except Exception as exc:
            return [exc] * len(texts)

    def close(self) -> None:
        pass
