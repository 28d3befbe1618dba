"""CNN features of photo files, computed in worker processes, streamed in order. A worker
that dies is restarted and its batches rerun, then photo by photo; a photo that crashes
alone is a ``PhotoError("corrupt")``."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Self, TypeVar

import numpy as np

from groundsearch.model.runtime.images.backend import (
    FeatureBackend,
    Outcome,
    PhotoBatchEmbedder,
    as_result,
    check_identity,
)
from groundsearch.model.runtime.images.photos import MAX_PIXELS, PhotoError

T = TypeVar("T")


_worker: PhotoBatchEmbedder | None = None
_worker_error: Exception | None = None


def _init_worker(identity: str, max_pixels: int, parent: int | None = None) -> None:
    """Process initializer; a failure is kept and raised by the first task."""
    global _worker, _worker_error
    # Ctrl-C reaches the terminal's whole process group: the parent decides what stops
    # (``groundsearch index --watch`` ends its batch cleanly), not each worker on its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent is not None:
        _exit_with_parent(parent)
    try:
        _worker = PhotoBatchEmbedder.in_worker(identity, max_pixels)
    except Exception as exc:
        _worker_error = exc


def _exit_with_parent(parent: int, every: float = 1.0) -> None:
    """End this worker once ``parent`` is gone (a parent killed by SIGKILL runs no shutdown)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _run_batch(paths: list[str]) -> list[Outcome]:
    if _worker is None:
        raise _worker_error or RuntimeError("feature worker was not initialised")
    return _worker.run(paths)


def _ping() -> None:
    _run_batch([])


@dataclass
class _Job(Generic[T]):
    items: list[T]
    paths: list[str]
    alone: bool = False  # rerun after a crash: nothing else in flight
    future: Future[list[Outcome]] | None = field(default=None, repr=False)


class FeaturePool(FeatureBackend):
    """``workers`` processes (0: the calling process) that turn photo files into CNN
    features of the ``FeatureExtractor`` ``identity`` (a ``FeatureBackend``)."""

    #: The task a worker runs on a batch of paths (tests replace it).
    task: Callable[[list[str]], list[Outcome]] = staticmethod(_run_batch)

    def __init__(
        self, identity: str, workers: int, batch_size: int = 16, max_pixels: int = MAX_PIXELS
    ) -> None:
        check_identity(identity)  # an unknown backbone fails here
        if workers < 0 or batch_size < 1:
            raise ValueError("workers must be ≥ 0 and batch_size ≥ 1")
        self.identity, self.workers = identity, workers
        self.batch_size, self.max_pixels = batch_size, max_pixels
        self._executor: ProcessPoolExecutor | None = None
        self._local: PhotoBatchEmbedder | None = None

    def __enter__(self) -> Self:
        if self.workers:
            self._pool()
        return self

    def close(self, wait: bool = True) -> None:
        """Stop the worker processes (a later ``map`` starts them again)."""
        if self._executor is not None:
            self._executor.shutdown(wait=wait, cancel_futures=True)
            self._executor = None

    def map(
        self, items: Iterable[T], path_of: Callable[[T], Path]
    ) -> Iterator[tuple[T, np.ndarray | PhotoError]]:
        """Each item with its photo's features or ``PhotoError``, in order, read lazily."""
        source = iter(items)
        ahead = max(1, 2 * self.workers)
        jobs: deque[_Job[T]] = deque()
        try:
            while True:
                # after a crash, the jobs rerun alone are done before anything new starts
                while (
                    len(jobs) < ahead
                    and not any(j.alone for j in jobs)
                    and (batch := list(itertools.islice(source, self.batch_size)))
                ):
                    jobs.append(self._submit(_Job(batch, [str(path_of(i)) for i in batch])))
                if not jobs:
                    return
                job = jobs.popleft()
                try:
                    outcomes = self._result(job)
                except BrokenProcessPool:
                    self._restart()
                    if (crashed := _after_crash(job, jobs)) is None:
                        continue
                    outcomes = crashed
                for item, outcome in zip(job.items, outcomes, strict=True):
                    yield item, as_result(outcome)
        finally:
            for job in jobs:
                if job.future is not None:
                    job.future.cancel()

    def _submit(self, job: _Job[T]) -> _Job[T]:
        if self.workers and not job.alone:
            try:
                job.future = self._pool().submit(type(self).task, job.paths)
            except BrokenProcessPool:  # a job in flight broke it: ``map`` recovers when
                job.future = None  # it reaches that job, or this one (``_result``)
        return job

    def _result(self, job: _Job[T]) -> list[Outcome]:
        """The job's outcomes: its future's, or computed now (alone, or in this process)."""
        if job.future is not None:
            return job.future.result()
        if self.workers:
            return self._pool().submit(type(self).task, job.paths).result()
        if self._local is None:
            self._local = PhotoBatchEmbedder(self.identity, self.max_pixels)
        return self._local.run(job.paths)

    def _pool(self) -> ProcessPoolExecutor:
        """The running executor, started (and checked with one task) if there is none."""
        if self._executor is not None:
            return self._executor
        executor = ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(self.identity, self.max_pixels, os.getpid()),
        )
        try:  # a ping per worker (a process per task): each loads its model now, side by side
            for ping in [executor.submit(_ping) for _ in range(self.workers)]:
                ping.result()
        except BaseException as exc:
            executor.shutdown(cancel_futures=True)
            if isinstance(exc, BrokenProcessPool):
                raise RuntimeError(f"feature workers ({self.identity}) failed to start") from exc
            raise
        self._executor = executor
        return executor

    def _restart(self) -> None:
        self.close(wait=False)
        self._pool()


def _after_crash(job: _Job[T], jobs: deque[_Job[T]]) -> list[Outcome] | None:
    """After ``job`` broke the pool: its outcomes, or None when it went back into ``jobs``."""
    if not job.alone:  # which job crashed is unknown: rerun every one in flight alone
        jobs.appendleft(job)
        for other in jobs:
            other.alone, other.future = True, None
        return None
    if len(job.items) == 1:
        return [("corrupt", f"{job.paths[0]}: the decoder crashed on this file")]
    singles = [_Job([it], [p], True) for it, p in zip(job.items, job.paths, strict=True)]
    jobs.extendleft(reversed(singles))  # a batch that crashes alone: photo by photo
    return None
