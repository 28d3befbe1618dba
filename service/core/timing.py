"""Stage timings: each stage of a request's work is timed into its answer and observed.

with stages.stage("parse", timings):     # timings["parse"] += milliseconds
    ...     # and ``observe`` (the app's metrics) gets the seconds
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Milliseconds per stage, as answers report them (``timings_ms``).
Timings = dict[str, float]
Observe = Callable[[str, float], None]


def _ignore(stage: str, seconds: float) -> None:
    pass


class Stages:
    """Times stages into a request's ``Timings`` and hands each to ``observe``."""

    def __init__(self, observe: Observe | None = None) -> None:
        self.observe: Observe = observe or _ignore

    @contextmanager
    def stage(self, name: str, timings: Timings) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            timings[name] = timings.get(name, 0.0) + 1000 * seconds
            self.observe(name, seconds)
