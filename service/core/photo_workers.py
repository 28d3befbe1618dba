"""The threads that decode photos and run the backbone, at a lower CPU priority.

A photo costs ~20× the CPU of a query; these threads run niced (``NICENESS``), so photo
work uses the CPU the text work leaves and searches stay fast under uploads.
"""

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
#: Added to the threads' niceness (Linux: setpriority on a thread id is per thread).
NICENESS = 10
#: The threads' names begin with this.
THREAD_PREFIX = "photo"


def _lower_priority() -> None:
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)


class PhotoWorkers:
    """``concurrency`` niced threads; ``run`` awaits a blocking call on one of them."""

    def __init__(self, concurrency: int) -> None:
        self._pool = ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix=THREAD_PREFIX, initializer=_lower_priority
        )

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))
