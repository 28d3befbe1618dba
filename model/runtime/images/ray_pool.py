"""CNN features of photo files on a Ray cluster (``groundsearch index --ray ADDRESS``): the
``FeatureBackend`` (``images.backend``) beside the local ``FeaturePool``.

    with RayFeaturePool("efficientnet-lite2", "local") as pool:
        for item, result in pool.map(items, lambda item: item.path):
            ...  # float32 features or PhotoError, as FeaturePool gives them

Ray Data batch inference: the pending photos are read lazily from ``items`` in windows
(1,024 first, doubling up to ``window``: by default 2,048 per actor, at least 16,384),
each window one dataset of (index, path) rows (``ray.data.from_items``) mapped by a
fixed pool of actors (``map_batches`` with a callable class, ``ActorPoolStrategy``),
each actor loading the backbone once and running ``PhotoBatchEmbedder``, the code
``FeaturePool``'s workers run, so both paths compute the same features. Ray Data's
streaming executor bounds what is in flight; results come back unordered, as they
finish, each with its item. While a window runs, the next one is read from ``items``
(the caller's hashing overlaps the CNN). An actor pool lives as long as its dataset, so
each window starts its actors afresh (seconds): large windows keep that a few percent.

Each actor asks for 0.9 CPU (0.9 × CPUs / actors when there are more actors than CPUs):
actors that take whole CPUs leave Ray Data no room for its own tasks on a small machine.
Photos must be readable at the same path on every node (a shared filesystem), and
groundsearch installed there. An actor that dies on a photo (a decoder crash) is
restarted and its batch retried twice; a window whose job still fails is finished in
this process by a one-worker ``FeaturePool``, which isolates a crashing photo (unless
the cluster has embedded nothing yet: then it is the cluster, a ``RayClusterError``).
"""

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
    """The Ray Data callable class: one backbone per actor, a batch of paths → features.

    Output columns: ``index`` (as given), ``features`` (float32, zeros for a photo that
    failed), ``reason`` and ``message`` (empty for a photo that worked).
    """

    def __init__(self, identity: str, max_pixels: int) -> None:
        self.embedder = PhotoBatchEmbedder.in_worker(identity, max_pixels)
        self.dim = self.embedder.extractor.dim

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outcomes = self.embedder.run([str(p) for p in batch["path"]])
        n = len(outcomes)
        features = np.zeros((n, self.dim), np.float32)
        reasons = np.full(n, "", dtype=object)
        messages = np.full(n, "", dtype=object)
        for k, outcome in enumerate(outcomes):
            if isinstance(outcome, tuple):
                reasons[k], messages[k] = outcome
            else:
                features[k] = outcome
        return {
            "index": batch["index"],
            "features": features,
            "reason": reasons,
            "message": messages,
        }


def _retries(map_batches: Callable[..., Any]) -> dict[str, int]:
    """Bounded retries of a batch whose actor died, where Ray still takes actor options
    as keywords (deprecated, gone in Ray 2.64): Ray Data's default retries forever, so a
    photo that crashes the decoder would stall the run."""
    kinds = {p.kind for p in inspect.signature(map_batches).parameters.values()}
    return {"max_task_retries": TASK_RETRIES} if inspect.Parameter.VAR_KEYWORD in kinds else {}


def _check_reachable(address: str) -> None:
    """Raise ``OSError`` unless ``host:port`` (or ``ray://host:port``) accepts a TCP
    connection within ``CONNECT_TIMEOUT``: ``ray.init`` retries an address that does not
    answer for many minutes."""
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
        raise RayClusterError(
            f"groundsearch index --ray needs Ray ({exc}): {INSTALL_HINT}"
        ) from None
    return ray


class RayFeaturePool(FeatureBackend):
    """Photo files → CNN features on Ray Data actors (a ``FeatureBackend``, like
    ``FeaturePool``).

    Args:
        identity: the ``FeatureExtractor`` identity (e.g. ``efficientnet-lite2``).
        address: ``local`` starts a cluster on this machine (every core) and stops it at
            the end; ``auto`` connects to the running cluster; anything else is passed
            to ``ray.init(address=...)`` (e.g. ``ray://head:10001``). When Ray is already
            initialised in this process, that connection is used as it is.
        actors: actors in the pool (default: one per CPU of the cluster).
        batch_size: photos per actor call.
        max_pixels: photos with more pixels are refused (``PhotoError("too-large")``).
        window: pending photos per Ray dataset at most (default: ``PER_ACTOR`` per actor,
            at least ``WINDOW``).
        progress: show Ray's progress bars and logs (otherwise only errors).
    """

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
        self.window = window or WINDOW
        self.progress = progress
        self.actors = 0
        self.cpus_per_actor = 0.0
        self._ray: Any = None
        self._owned = False  # whether this pool called ray.init (and so shuts it down)
        self._saved: dict[str, Any] = {}
        self._log_level = logging.NOTSET
        self._embedded = False  # whether the cluster has given back any result

    def __enter__(self) -> Self:
        self.check()
        return self

    def check(self) -> None:
        """Fail now (``RayClusterError``) if Ray is missing or the cluster cannot be
        joined; a ``local`` cluster is started later, once there is a photo to embed."""
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
        quiet = {
            "enable_progress_bars": self.progress,
            "print_on_execution_start": self.progress,
        }
        self._saved = {k: getattr(context, k) for k in quiet if hasattr(context, k)}
        for k, v in quiet.items():
            setattr(context, k, v)
        self._log_level = logging.getLogger("ray.data").level
        if not self.progress:
            logging.getLogger("ray.data").setLevel(logging.ERROR)

    def _init(self, ray: Any) -> None:
        level = logging.WARNING if self.progress else logging.ERROR
        common = {"logging_level": level, "log_to_driver": self.progress}
        backend = os.environ.get("RAY_BACKEND_LOG_LEVEL")
        if not self.progress and backend is None:  # Ray's C++ core writes to stderr
            os.environ["RAY_BACKEND_LOG_LEVEL"] = "fatal"
        try:
            if self.address not in ("local", "auto"):
                _check_reachable(self.address)
            if self.address == "local":
                ray.init(
                    address="local", num_cpus=os.cpu_count(), include_dashboard=False, **common
                )
            else:
                ray.init(address=self.address, **common)
        except (OSError, ValueError, RuntimeError) as exc:
            with contextlib.suppress(Exception):
                ray.shutdown()
            where = "start a local Ray cluster" if self.address == "local" else "reach"
            raise RayClusterError(
                f"cannot {where} the Ray cluster {self.address!r}: {exc}"
            ) from None
        finally:
            if backend is None:
                os.environ.pop("RAY_BACKEND_LOG_LEVEL", None)
        self._owned = True

    def close(self) -> None:
        """Restore Ray Data's settings; leave the cluster if this pool joined it (a
        ``local`` one stops)."""
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
        """Each item with its photo's features (float32) or ``PhotoError``, unordered
        (as the cluster finishes them); ``items`` is read lazily, a window at a time."""
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
            for index, features, reason, message in zip(
                batch["index"], batch["features"], batch["reason"], batch["message"], strict=True
            ):
                outcome = (reason, str(message)) if reason else np.array(features, np.float32)
                yield int(index), as_result(outcome)

    def _here(
        self, items: list[T], path_of: Callable[[T], Path]
    ) -> Iterator[tuple[T, np.ndarray | PhotoError]]:
        """Items embedded in this process's crash-isolating pool (one worker)."""
        with FeaturePool(self.identity, 1, self.batch_size, self.max_pixels) as pool:
            yield from pool.map(items, path_of)
