"""``groundsearch serve``: the web service and its page."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from groundsearch.cli.common import CliError, command, positive_int, user_errors

COMMANDS = ("serve",)


def cmd_serve(args: argparse.Namespace) -> int:
    # Stopped (SIGTERM: uvicorn ends the process with it once the app has stopped; Ctrl-C:
    # here, at any moment), the process ends at once: what it holds is closed, its
    # children ended, and the interpreter's teardown of torch and FAISS takes seconds.
    args.quick_exit = True
    try:
        return _serve(args)
    except KeyboardInterrupt:  # Ctrl-C (raised again by uvicorn once the app has stopped)
        return 130


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from groundsearch.index.errors import StoreError
    from groundsearch.index.ingest.defaults import ensure_gallery
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.objects.detector import installed_detector
    from groundsearch.model.runtime.parsing import Parser
    from groundsearch.service.core.settings import ServiceSettings
    from groundsearch.service.http.app import create_app

    if args.shards and args.watch:
        raise CliError("--shards serves a read-only front: watch folders with the writer")
    given = {"checkpoint": args.checkpoint, "index_dir": args.index}
    overrides: dict[str, Any] = {k: Path(v) for k, v in given.items() if v}
    if args.watch:
        overrides["watch"] = os.pathsep.join(os.path.abspath(p) for p in args.watch)
    with user_errors(DatasetError, CheckpointError, StoreError, ValueError):
        s = ServiceSettings(**overrides)
        for folder in s.watch_folders:
            if not folder.is_dir():
                what = "not a folder" if folder.exists() else "no such folder"
                raise CliError(f"{folder}: {what} (--watch keeps folders indexed)")
        served = ensure_gallery(
            s.checkpoint_path,
            s.index_path,
            Parser(**s.parser_options()),
            s.cache_dir,
            s.flickr8k_dir,
            sample=args.sample,
            empty=bool(s.watch_folders) and not args.sample,
            detector=installed_detector(s),
        )
    if s.watch_folders:
        served += ", keeping " + ", ".join(map(str, s.watch_folders)) + " indexed into it"
    if args.shards:
        return serve_sharded(args, s, served)
    print(f"serving {served} on http://{args.host}:{args.port}", file=sys.stderr)
    app = create_app(s)
    app.state.ends_process = True  # a stop while loading ends the parser processes for good
    if not args.front or sys.platform != "linux":
        uvicorn.run(app, host=args.host, port=args.port, **_logging(args))
        return 0
    return serve_behind_front(args, app)


def _logging(args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn's logging options from the command line."""
    return {"log_level": args.log_level, "access_log": args.access_log}


def serve_behind_front(args: argparse.Namespace, app: Any) -> int:
    """The app on a Unix socket behind the front process (``service.http.front``), which
    listens on the port and answers the refusals at once (a process of its own: not
    behind the app's work for the GIL or, niced as that work is, for a core)."""
    import socket
    import threading

    import uvicorn

    from groundsearch.service.http.admission import front_spec
    from groundsearch.service.http.front import follow_reports, start_front, stop_front

    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    try:
        listening = socket.create_server((args.host, args.port), family=family, backlog=2048)
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    spec = front_spec(app.routes, app.state.admission, app.state.settings.query_cache)
    front, app_socket = start_front(listening, spec)
    threading.Thread(  # the front's refusals into the app's /metrics
        target=follow_reports,
        args=(front.stdout, app.state.metrics.observe_front),
        name="front-reports",
        daemon=True,
    ).start()
    try:
        # the front holds the clients' connections and ends its own to the app with them
        keep = 24 * 3600
        uvicorn.run(app, fd=app_socket.fileno(), timeout_keep_alive=keep, **_logging(args))
    finally:
        stop_front(front)
        app_socket.close()
    return 0


def serve_sharded(args: argparse.Namespace, s: Any, served: str) -> int:
    """``serve --shards N``: the gallery's shards (written first when missing) as Ray
    Serve deployments on a Ray cluster (``--ray``: local starts one here), and this
    process the read-only front over them."""
    import logging

    import uvicorn

    from groundsearch.index.errors import StoreError
    from groundsearch.index.search.index_kinds import IndexSettings
    from groundsearch.index.search.shards import ShardSet, write_shards
    from groundsearch.service.core.settings import ServiceSettings
    from groundsearch.service.core.sharding import ShardingError, start_shards, stop_shards
    from groundsearch.service.http.app import create_app

    folder = Path(args.shard_dir) if args.shard_dir else s.index_path / f"shards-{args.shards}"
    with user_errors(StoreError, OSError, ValueError):
        try:
            shard_set = ShardSet.read(folder)
            fresh = shard_set.shards != args.shards
        except StoreError:
            fresh = True
        if fresh:
            print(f"writing {args.shards} shards to {folder}", file=sys.stderr)
            shard_set = write_shards(s.index_path, folder, args.shards)
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        raise CliError(
            f"--shards needs Ray Serve ({exc}): pip install 'groundsearch[ray]'"
        ) from None
    common: dict[str, Any] = {"logging_level": logging.WARNING, "log_to_driver": False}
    if args.ray == "local":
        common.update(num_cpus=os.cpu_count(), include_dashboard=False)
    ray.init(address=args.ray, **common)
    search = IndexSettings(
        nprobe=s.search_nprobe, k_factor=s.search_k_factor, ef_search=s.hnsw_ef_search
    )
    try:
        with user_errors(ShardingError):
            start_shards(shard_set, search)
        front = ServiceSettings(**{**s.model_dump(), "shards": folder, "read_only": True})
        print(
            f"serving {served} from {shard_set.shards} shards ({shard_set.kind}, "
            f"{folder}) on Ray Serve, read-only, on http://{args.host}:{args.port}",
            file=sys.stderr,
        )
        try:
            uvicorn.run(create_app(front), host=args.host, port=args.port, **_logging(args))
        except SystemExit as exc:  # uvicorn re-raises SIGTERM into the handler ray.init set
            if exc.code != signal.SIGTERM:
                raise
    finally:
        stop_shards(shard_set.shards)
        serve.shutdown()
        ray.shutdown()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "serve", cmd_serve, "run the web service and its page (default :8000)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=positive_int, default=8000, help="port to listen on")
    p.add_argument("--index", help="gallery folder (default: GROUNDSEARCH_INDEX_DIR or cache)")
    p.add_argument("--checkpoint", help="joint model (default: the shipped SDT-RNN)")
    p.add_argument(
        "--sample", action="store_true", help="build the sample gallery even if Flickr8k is there"
    )
    p.add_argument(
        "--watch",
        action="append",
        metavar="PATH",
        help="keep this photo folder indexed into the served gallery, its changes searchable "
        "within seconds (repeatable; a new gallery starts empty; GROUNDSEARCH_WATCH: ':'-joined)",
    )
    p.add_argument(
        "--shards",
        type=positive_int,
        metavar="N",
        help="search the photos on N Ray Serve shards (written to INDEX/shards-N first when "
        "missing: `groundsearch shard`); this server is their read-only front",
    )
    p.add_argument("--shard-dir", help="with --shards: the shards' folder (default INDEX/shards-N)")
    p.add_argument(
        "--ray",
        default="local",
        metavar="ADDRESS",
        help="with --shards: the Ray cluster (local: start one here; auto: the running one; "
        "or an address for ray.init)",
    )
    p.add_argument(
        "--no-front",
        dest="front",
        action="store_false",
        default=os.environ.get("GROUNDSEARCH_FRONT", "1") != "0",
        help="the app itself listens on the port (default on Linux: a small front process "
        "listens and refuses at once what the app would refuse; GROUNDSEARCH_FRONT=0: off)",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument(
        "--access-log",
        action="store_true",
        default=os.environ.get("GROUNDSEARCH_ACCESS_LOG", "").lower() in ("1", "true", "yes", "on"),
        help="a line per request (uvicorn's access log; off by default: /metrics counts the "
        "requests, and behind the front it cannot name the client; GROUNDSEARCH_ACCESS_LOG=1)",
    )
