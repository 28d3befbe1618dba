"""The gallery's shards served by Ray Serve: each deployment (``groundsearch-shard-<s>``)
answers the ``Shard`` methods through ``call``; the front's gallery (``open_sharded``)
follows the records like a replica, its ``images`` index a ``ShardedIndex`` over them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from groundsearch.index.errors import StoreError
from groundsearch.index.gallery import INDEX_DIR, Gallery
from groundsearch.index.search.index_kinds import IndexSettings
from groundsearch.index.search.search_indexes import SearchIndexes
from groundsearch.index.search.shards import TABLE, Shard, ShardedIndex, ShardSet
from groundsearch.index.store import records
from groundsearch.index.store.records import DB_FILE, Records

log = logging.getLogger("groundsearch.service")
#: Each shard's Ray Serve application is named this plus the shard's number.
APP_PREFIX = "groundsearch-shard-"
#: CPUs Ray reserves for each shard's replica (a search is one thread; mapped pages are
#: the OS's): a fraction, so that a small machine holds several shards and the front.
CPUS_PER_SHARD = 0.5
#: Requests one replica works on at once (searches release the GIL inside FAISS).
MAX_ONGOING = 16
#: How long the front waits for a shard's answer before answering 503.
SHARD_TIMEOUT_S = 10.0
#: What the front may call on a shard.
SHARD_METHODS = frozenset(
    {"info", "search", "score_likeliest", "held", "search_among", "add", "remove"}
)
INSTALL_HINT = "install it with `pip install 'groundsearch[ray]'`"


class ShardingError(RuntimeError):
    """Ray Serve is missing, or the shards' deployments cannot be started or reached."""


class ShardReplica:
    """A Ray Serve replica holding one shard, loaded when the replica starts."""

    def __init__(self, folder: str, shard: int, settings: IndexSettings | None = None) -> None:
        self.shard = Shard.open(ShardSet.read(Path(folder)), shard, settings)
        log.info("shard %d: %s", shard, self.shard.index.describe())

    def call(self, method: str, *args: Any) -> Any:
        if method not in SHARD_METHODS:
            raise ValueError(f"a shard has no method {method!r}")
        return getattr(self.shard, method)(*args)


class RayFanout:
    """A ``Fanout`` over the shards' deployment handles."""

    def __init__(self, handles: Sequence[Any]) -> None:
        self.handles = list(handles)
        self.shards = len(self.handles)

    def call(self, method: str, args: Sequence[tuple[Any, ...] | None]) -> list[Any]:
        """Every shard's answer; StoreError (a 503) naming the first that failed."""
        pending = [
            None if a is None else handle.call.remote(method, *a)
            for handle, a in zip(self.handles, args, strict=True)
        ]
        answers = []
        for s, p in enumerate(pending):
            try:
                answers.append(None if p is None else p.result(timeout_s=SHARD_TIMEOUT_S))
            except ValueError:  # the shard's own refusal of a bad argument: the caller's
                raise
            except Exception as exc:
                for rest in pending[s + 1 :]:
                    if rest is not None:
                        rest.cancel()
                raise StoreError(f"shard {s} did not answer: {type(exc).__name__}: {exc}") from exc
        return answers


def _serve() -> Any:
    try:
        from ray import serve
    except ImportError as exc:
        raise ShardingError(f"sharded serving needs Ray Serve ({exc}): {INSTALL_HINT}") from None
    return serve


def start_shards(
    shard_set: ShardSet, settings: IndexSettings | None = None, cpus: float = CPUS_PER_SHARD
) -> RayFanout:
    """Deploy one Ray Serve application per shard, wait until each has loaded, and return
    the fan-out over their handles."""
    serve = _serve()
    serve.start(proxy_location="Disabled")  # no HTTP proxy: the FastAPI app is the front
    handles = []
    for s in range(shard_set.shards):
        deployment = serve.deployment(
            ShardReplica,
            name=f"shard-{s}",
            num_replicas=1,
            ray_actor_options={"num_cpus": cpus},
            max_ongoing_requests=MAX_ONGOING,
        )
        app = deployment.bind(str(shard_set.folder.resolve()), s, settings)
        try:
            handles.append(serve.run(app, name=f"{APP_PREFIX}{s}", route_prefix=None))
        except Exception as exc:  # a replica that cannot load its shard fails the deploy
            raise ShardingError(f"shard {s} could not start: {exc}") from exc
    return RayFanout(handles)


def connect_shards(shards: int) -> RayFanout:
    """The handles of the ``shards`` deployments already running on the cluster."""
    serve = _serve()
    try:
        return RayFanout([serve.get_app_handle(f"{APP_PREFIX}{s}") for s in range(shards)])
    except Exception as exc:
        raise ShardingError(
            f"the shards' Ray Serve applications are not running ({exc}): start them with "
            "`groundsearch serve --shards N`"
        ) from None


def stop_shards(shards: int) -> None:
    """Delete the shards' applications (their replicas unmap their shards)."""
    serve = _serve()
    for s in range(shards):
        try:
            serve.delete(f"{APP_PREFIX}{s}")
        except Exception as exc:
            log.warning("could not stop shard %d: %s", s, exc)


def sharded_gallery(
    gallery_folder: Path,
    shards_folder: Path,
    identity: dict[str, str] | None = None,
    settings: IndexSettings | None = None,
    ray_address: str = "auto",
) -> Gallery:
    """The gallery, read-only, searched on the shards of ``shards_folder``."""
    import ray

    shard_set = ShardSet.read(shards_folder)
    if not ray.is_initialized():
        ray.init(address=ray_address, logging_level=logging.WARNING, log_to_driver=False)
    images = ShardedIndex(connect_shards(shard_set.shards), shard_set, settings)
    return open_sharded(gallery_folder, images, identity, settings)


def open_sharded(
    folder: Path,
    images: ShardedIndex,
    identity: dict[str, str] | None = None,
    settings: IndexSettings | None = None,
) -> Gallery:
    """The gallery in ``folder``, read-only, its photos searched through ``images``;
    StoreError when the shards were written from another gallery or a newer copy."""
    folder = Path(folder)
    db_records = Records.open(folder / DB_FILE, identity, migrate=False)
    try:
        shard_set = images.shard_set
        meta = db_records.meta
        if meta["identity"] != shard_set.identity or int(meta["dim"]) != shard_set.dim:
            raise StoreError(
                f"the shards at {shard_set.folder} were written from another gallery than "
                f"{folder}: write them again"
            )
        with db_records.snapshot() as db:
            ahead = shard_set.last_id > records.last_id(db, TABLE) or (
                shard_set.last_removal > records.last_removal(db)
            )
        if ahead:
            raise StoreError(
                f"the shards at {shard_set.folder} hold photos the gallery at {folder} does "
                "not (written from a newer copy): write them again"
            )
        indexes = SearchIndexes(folder / INDEX_DIR, db_records, True, settings, {TABLE: images})
    except BaseException:
        db_records.close()
        raise
    return Gallery(folder, indexes)
