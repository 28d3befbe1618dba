"""Dynamic batching of parses: requests that wait together are parsed together.

The stanza pipeline serves one caller at a time, and one short sentence costs about
as much as several parsed in one batch. So request threads put their text on a queue
and wait; one parser thread takes everything queued (up to ``max_batch``) and parses it
in one call. Idle, a query is parsed alone, at once; under load, batches grow.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

from model.parsing import ParseError, Parser
from model.parsing.tree import DependencyTree


class ParseBatcher:
    """Parse single texts from many threads through one batching parser thread."""

    def __init__(self, parser: Parser, max_batch: int = 32) -> None:
        self.parser, self.max_batch = parser, max_batch
        self._queue: queue.Queue[tuple[str, Future] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="parse-batcher", daemon=True)
        self._thread.start()

    def parse(self, text: str) -> DependencyTree:
        """The tree of one (cleaned) text; raises ParseError as ``Parser.parse`` does."""
        future: Future[DependencyTree] = Future()
        self._queue.put((text, future))
        return future.result()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
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
            self._parse_batch(batch)

    def _parse_batch(self, batch: list[tuple[str, Future]]) -> None:
        try:
            trees = self.parser.parse([text for text, _ in batch])
        except ParseError:  # one bad text: parse them one by one to blame the right one
            for text, future in batch:
                self._settle(future, text)
            return
        except Exception as exc:
            for _, future in batch:
                future.set_exception(exc)
            return
        for (_, future), tree in zip(batch, trees, strict=True):
            future.set_result(tree)

    def _settle(self, future: Future, text: str) -> None:
        try:
            future.set_result(self.parser.parse([text])[0])
        except Exception as exc:
            future.set_exception(exc)
