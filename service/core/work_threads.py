"""The threads that do a request's work, niced below the event loop.

The event loop reads every request and answers the 429s (~0.2 ms a refusal); the work
threads, parse threads and parser processes run niced (``NICENESS``, Linux: per thread),
so on a busy CPU the loop runs first (docs/BENCHMARKS.md, "Overload")."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
#: Added to the work threads' niceness (Linux: setpriority on a thread id is per thread).
NICENESS = 10
#: The photo threads' names begin with this.
PHOTO_PREFIX = "photo"
#: The text threads' names (a query's parse, encoding and search) begin with this.
TEXT_PREFIX = "text"


def lower_priority(niceness: int = NICENESS) -> None:
    """Make the calling thread (and the threads it starts later) ``niceness`` nicer."""
    if niceness:
        with contextlib.suppress(OSError, AttributeError):
            me = threading.get_native_id()
            now = os.getpriority(os.PRIO_PROCESS, me)
            os.setpriority(os.PRIO_PROCESS, me, min(19, now + niceness))


class WorkThreads:
    """``concurrency`` niced threads; ``run`` awaits a blocking call on one of them."""

    def __init__(
        self, concurrency: int, prefix: str = PHOTO_PREFIX, niceness: int = NICENESS
    ) -> None:
        self._pool = ThreadPoolExecutor(
            max_workers=concurrency,
            thread_name_prefix=prefix,
            initializer=lower_priority,
            initargs=(niceness,),
        )

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))
