"""CNN features of photo files, computed in worker processes, streamed in order.

``FeaturePool(identity, workers)`` starts ``workers`` "spawn" processes (torch is not
fork-safe), each with one torch thread and one ``FeatureExtractor``; ``map`` sends them
batches of paths, at most two batches per worker in flight, and yields each item with
its float32 features or its ``PhotoError``, in the order the items came. With
``workers=0`` the same code runs in the calling process.

A worker that dies (a decoder crash) breaks the pool: it is restarted, and the batches
that were in flight are run again one at a time, alone, a batch that crashes alone then
photo by photo; a photo that crashes alone is a ``PhotoError("corrupt")``.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

import numpy as np
import torch
from PIL import Image

from groundsearch.model.runtime.images.backbones import get_spec
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.images.photos import MAX_PIXELS, PhotoError, Reason, decode_photo

T = TypeVar("T")
#: A photo's result as it crosses the process boundary (``PhotoError`` does not pickle).
Outcome = np.ndarray | tuple[Reason, str]


class PhotoBatchEmbedder:
    """One extractor and the pixel limit: decodes and embeds a batch of paths.

    What each ``FeaturePool`` worker (and each Ray actor of ``groundsearch index --ray``)
    runs, so both paths compute the same features: ``run(paths)`` gives each path's
    float32 features or ``(reason, message)``, in order.
    """

    def __init__(self, identity: str, max_pixels: int) -> None:
        self.extractor = FeatureExtractor.for_identity(identity)
        self.max_pixels = max_pixels

    def run(self, paths: list[str]) -> list[Outcome]:
        """Each path's features or ``(reason, message)``, in order."""
        out: list[Outcome | None] = [None] * len(paths)
        images: list[Image.Image] = []
        good: list[int] = []
        for i, path in enumerate(paths):
            try:
                img, _ = decode_photo(path, self.max_pixels, min_side=self.extractor.spec.resize)
            except PhotoError as exc:
                out[i] = (exc.reason, str(exc))
            except OSError as exc:
                out[i] = ("corrupt", f"{path}: cannot be read ({exc})")
            else:
                images.append(img)
                good.append(i)
        if images:
            try:
                vectors = list(self.extractor.embed_images(images))
            except Exception:  # one odd image: embed one by one to find it
                vectors = [
                    self._embed_one(img, paths[i]) for i, img in zip(good, images, strict=True)
                ]
            for i, vector in zip(good, vectors, strict=True):
                out[i] = vector
        return [o for o in out if o is not None]

    def _embed_one(self, img: Image.Image, path: str) -> Outcome:
        try:
            return self.extractor.embed_images([img])[0]
        except Exception as exc:
            return ("corrupt", f"{path}: features failed ({exc})")


_worker: PhotoBatchEmbedder | None = None
_worker_error: Exception | None = None


def _init_worker(identity: str, max_pixels: int, parent: int | None = None) -> None:
    """Process initializer; a failure is kept and raised by the first task."""
    global _worker, _worker_error
    if parent is not None:
        _exit_with_parent(parent)
    torch.set_num_threads(1)
    try:
        _worker = PhotoBatchEmbedder(identity, max_pixels)
    except Exception as exc:
        _worker_error = exc


def _exit_with_parent(parent: int, every: float = 1.0) -> None:
    """End this worker once ``parent`` is gone. A parent killed by SIGKILL runs no
    shutdown, and its workers would otherwise wait forever (blocked writing a result
    to a pipe no one reads), each holding its model in memory."""

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


class FeaturePool:
    """Worker processes that turn photo files into CNN features (a context manager).

    Args:
        identity: the ``FeatureExtractor`` identity (e.g. ``efficientnet-lite0``).
        workers: processes to start; 0 computes in the calling process.
        batch_size: photos per task.
        max_pixels: photos with more pixels are refused (``PhotoError("too-large")``).
    """

    #: The task a worker runs on a batch of paths (tests replace it).
    task: Callable[[list[str]], list[Outcome]] = staticmethod(_run_batch)

    def __init__(
        self, identity: str, workers: int, batch_size: int = 16, max_pixels: int = MAX_PIXELS
    ) -> None:
        get_spec(identity.partition("-10crop")[0])  # an unknown backbone fails here
        if workers < 0 or batch_size < 1:
            raise ValueError("workers must be ≥ 0 and batch_size ≥ 1")
        self.identity = identity
        self.workers = workers
        self.batch_size = batch_size
        self.max_pixels = max_pixels
        self._executor: ProcessPoolExecutor | None = None
        self._local: PhotoBatchEmbedder | None = None

    def __enter__(self) -> FeaturePool:
        if self.workers:
            self._pool()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker processes (a later ``map`` starts them again)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    def map(
        self, items: Iterable[T], path_of: Callable[[T], Path]
    ) -> Iterator[tuple[T, np.ndarray | PhotoError]]:
        """Each item with its photo's features (float32) or ``PhotoError``, in order;
        ``items`` is read lazily, a few batches ahead of what has been yielded."""
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
                    yield item, _as_result(outcome)
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
        try:  # one ping per worker: the executor starts a process per task submitted,
            # so every worker loads its model now, side by side, not on its first batch
            for ping in [executor.submit(_ping) for _ in range(self.workers)]:
                ping.result()
        except BrokenProcessPool as exc:
            executor.shutdown(cancel_futures=True)
            raise RuntimeError(f"feature workers ({self.identity}) failed to start") from exc
        except BaseException:
            executor.shutdown(cancel_futures=True)
            raise
        self._executor = executor
        return executor

    def _restart(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
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


def _as_result(outcome: Outcome) -> np.ndarray | PhotoError:
    if isinstance(outcome, tuple):
        return PhotoError(*outcome)
    return outcome
