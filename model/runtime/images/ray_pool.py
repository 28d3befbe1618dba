"""CNN features of photo files on a Ray cluster (``groundsearch index --ray ADDRESS``):
growing windows of photos (readable at the same path on every node), each one Ray dataset
mapped by actors; a window that still fails is finished here by a ``FeaturePool``."""

from __future__ import annotations

import contextlib
import inspect
import itertools
import logging
import math
import os
import socket
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Self, TypeVar

import numpy as np

from groundsearch.model.runtime.images.backend import (
    FeatureBackend,
    PhotoBatchEmbedder,
    as_result,
    check_identity,
)
from groundsearch.model.runtime.images.photos import MAX_PIXELS, PhotoError
from groundsearch.model.runtime.images.pool import FeaturePool

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Pending photos in the first window: small, so the CNN starts soon.
FIRST_WINDOW = 1024
#: Pending photos per window at most (each window is one Ray dataset), unless ...
WINDOW = 16384
#: ... this many per actor are more: each actor's share of a window is minutes of work.
PER_ACTOR = 2048
#: The share of a CPU an actor asks for when there is a CPU per actor.
ACTOR_CPU = 0.9
#: Retries of a batch whose actor died before the window's job fails.
TASK_RETRIES = 2
#: Seconds to wait for a cluster's address to answer (``ray.init`` waits for minutes).
CONNECT_TIMEOUT = 10.0
INSTALL_HINT = "install the ray extra: pip install 'groundsearch[ray]'"


class RayClusterError(RuntimeError):
    """Ray is not installed, or the cluster cannot be reached or started."""


class EmbedBatch:
    """The Ray Data callable class: one backbone per actor, a batch of paths → columns
    ``index``, ``features`` (zeros on failure), ``reason`` and ``message`` (empty on success)."""

    def __init__(self, identity: str, max_pixels: int) -> None:
        self.embedder = PhotoBatchEmbedder.in_worker(identity, max_pixels)
        self.dim = self.embedder.extractor.dim

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outcomes = self.embedder.run([str(p) for p in batch["path"]])
        features = np.zeros((len(outcomes), self.dim), np.float32)
        reasons, messages = (np.full(len(outcomes), "", dtype=object) for _ in range(2))
        for k, outcome in enumerate(outcomes):
            if isinstance(outcome, tuple):
                reasons[k], messages[k] = outcome
            else:
                features[k] = outcome
        columns = {"features": features, "reason": reasons, "message": messages}
        return {"index": batch["index"], **columns}


def _retries(map_batches: Callable[..., Any]) -> dict[str, int]:
    """Bounded retries of a batch whose actor died, where Ray still takes them as keywords
    (Ray Data's default retries forever)."""
    kinds = {p.kind for p in inspect.signature(map_batches).parameters.values()}
    return {"max_task_retries": TASK_RETRIES} if inspect.Parameter.VAR_KEYWORD in kinds else {}


def _check_reachable(address: str) -> None:
    """``OSError`` unless ``host:port`` (or ``ray://host:port``) accepts a TCP connection
    within ``CONNECT_TIMEOUT`` (``ray.init`` would retry for minutes)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # not host:port: left to ray.init
    with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT):
        pass


def _import_ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError as exc:
        message = f"groundsearch index --ray needs Ray ({exc}): {INSTALL_HINT}"
        raise RayClusterError(message) from None
    return ray


class RayFeaturePool(FeatureBackend):
    """Photo files → CNN features on Ray Data actors (a ``FeatureBackend``). ``address``:
    ``local`` starts a cluster here, ``auto`` joins the running one, else ``ray.init``'s;
    ``actors``: default one per CPU; ``window``: pending photos per dataset."""

    def __init__(
        self,
        identity: str,
        address: str,
        actors: int | None = None,
        batch_size: int = 16,
        max_pixels: int = MAX_PIXELS,
        window: int | None = None,
        progress: bool = False,
    ) -> None:
        check_identity(identity)  # an unknown backbone fails here
        if any(n is not None and n < 1 for n in (actors, batch_size, window)):
            raise ValueError("actors, batch_size and window must be ≥ 1")
        self.identity, self.address, self.requested = identity, address, actors
        self.batch_size, self.max_pixels, self.requested_window = batch_size, max_pixels, window
        self.window, self.progress = window or WINDOW, progress
        self.actors, self.cpus_per_actor = 0, 0.0
        self._ray: Any = None
        self._owned = False  # whether this pool called ray.init (and so shuts it down)
        self._saved: dict[str, Any] = {}
        self._log_level = logging.NOTSET
        self._embedded = False  # whether the cluster has given back any result

    def __enter__(self) -> Self:
        self.check()
        return self

    def check(self) -> None:
        """``RayClusterError`` now if Ray is missing or the cluster cannot be joined."""
        _import_ray()
        if self.address != "local":
            self.connect()

    def connect(self) -> None:
        """Join (or start) the cluster and size the actor pool from its CPUs."""
        if self._ray is not None:
            return
        ray = _import_ray()
        if not ray.is_initialized():
            self._init(ray)
        cpus = float(ray.cluster_resources().get("CPU", 0))
        if cpus <= 0:
            self.close()
            raise RayClusterError(f"the Ray cluster at {self.address!r} has no CPUs")
        self.actors = self.requested or max(1, int(cpus))
        self.window = self.requested_window or max(WINDOW, PER_ACTOR * self.actors)
        self.cpus_per_actor = round(ACTOR_CPU * min(1.0, cpus / self.actors), 3)
        self._ray = ray
        context = ray.data.DataContext.get_current()
        quiet = {"enable_progress_bars": self.progress, "print_on_execution_start": self.progress}
        self._saved = {k: getattr(context, k) for k in quiet if hasattr(context, k)}
        for k, v in quiet.items():
            setattr(context, k, v)
        self._log_level = logging.getLogger("ray.data").level
        if not self.progress:
            logging.getLogger("ray.data").setLevel(logging.ERROR)

    def _init(self, ray: Any) -> None:
        level = logging.WARNING if self.progress else logging.ERROR
        common: dict[str, Any] = {"logging_level": level, "log_to_driver": self.progress}
        backend = os.environ.get("RAY_BACKEND_LOG_LEVEL")
        if not self.progress and backend is None:  # Ray's C++ core writes to stderr
            os.environ["RAY_BACKEND_LOG_LEVEL"] = "fatal"
        try:
            if self.address not in ("local", "auto"):
                _check_reachable(self.address)
            if self.address == "local":
                common.update(num_cpus=os.cpu_count(), include_dashboard=False)
            ray.init(address=self.address, **common)
        except (OSError, ValueError, RuntimeError) as exc:
            with contextlib.suppress(Exception):
                ray.shutdown()
            where = "start a local Ray cluster" if self.address == "local" else "reach"
            message = f"cannot {where} the Ray cluster {self.address!r}: {exc}"
            raise RayClusterError(message) from None
        finally:
            if backend is None:
                os.environ.pop("RAY_BACKEND_LOG_LEVEL", None)
        self._owned = True

    def close(self) -> None:
        """Restore Ray Data's settings; leave the cluster if this pool joined it."""
        if self._ray is not None:
            context = self._ray.data.DataContext.get_current()
            for k, v in self._saved.items():
                setattr(context, k, v)
            logging.getLogger("ray.data").setLevel(self._log_level)
        if self._owned:
            import ray

            ray.shutdown()
            self._owned = False
        self._ray = None

    def map(
        self, items: Iterable[T], path_of: Callable[[T], Path]
    ) -> Iterator[tuple[T, np.ndarray | PhotoError]]:
        """Each item with its features or ``PhotoError``, unordered, a window at a time."""
        source = iter(items)
        size = min(FIRST_WINDOW, self.window)
        window = list(itertools.islice(source, size))
        if window:
            self.connect()
        while window:
            size = min(2 * size, self.window)
            upcoming: list[T] = []
            done = [False] * len(window)
            try:
                for index, result in self._run(window, path_of):
                    done[index] = True
                    self._embedded = True
                    yield window[index], result
                    if len(upcoming) < size:  # read ahead while the cluster works
                        upcoming += itertools.islice(source, 2)
            except Exception as exc:
                if self._ray is None or not isinstance(exc, self._ray.exceptions.RayError):
                    raise
                if not self._embedded:  # nothing ever came back: the cluster, not a photo
                    raise RayClusterError(f"the Ray job failed: {exc}") from exc
                rest = [item for item, d in zip(window, done, strict=True) if not d]
                log.warning("Ray job failed (%s); %d photos embedded here instead", exc, len(rest))
                yield from self._here(rest, path_of)
            upcoming += itertools.islice(source, size - len(upcoming))
            window = upcoming

    def _run(
        self, window: list[T], path_of: Callable[[T], Path]
    ) -> Iterator[tuple[int, np.ndarray | PhotoError]]:
        """One window as one Ray dataset: (index in the window, result), as they come."""
        ray = self._ray
        rows = [{"index": i, "path": str(path_of(item))} for i, item in enumerate(window)]
        blocks = math.ceil(len(rows) / self.batch_size)  # a block a batch: even shares
        source = ray.data.from_items(rows, override_num_blocks=blocks)
        with warnings.catch_warnings():  # actor options are "ray_remote_args", deprecated
            warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
            dataset = source.map_batches(
                EmbedBatch,
                fn_constructor_kwargs={"identity": self.identity, "max_pixels": self.max_pixels},
                compute=ray.data.ActorPoolStrategy(size=self.actors),
                num_cpus=self.cpus_per_actor,
                batch_size=self.batch_size,
                **_retries(source.map_batches),
            )
        for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
            columns = (batch[k] for k in ("index", "features", "reason", "message"))
            for index, features, reason, message in zip(*columns, strict=True):
                outcome = (reason, str(message)) if reason else np.array(features, np.float32)
                yield int(index), as_result(outcome)

    def _here(
        self, items: list[T], path_of: Callable[[T], Path]
    ) -> Iterator[tuple[T, np.ndarray | PhotoError]]:
        """Items embedded in this process's crash-isolating pool (one worker)."""
        with FeaturePool(self.identity, 1, self.batch_size, self.max_pixels) as pool:
            yield from pool.map(items, path_of)
