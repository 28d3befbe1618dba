"""``groundsearch serve``: the web service and its page."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from groundsearch.cli.common import CliError, command, positive_int, user_errors


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from groundsearch.index.defaults import ensure_gallery
    from groundsearch.index.errors import StoreError
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.parsing import Parser
    from groundsearch.service.app import create_app
    from groundsearch.service.settings import ServiceSettings

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
            Parser(s.parser_dir, s.cache_dir),
            s.cache_dir,
            s.flickr8k_dir,
            sample=args.sample,
            empty=bool(s.watch_folders) and not args.sample,
        )
    if s.watch_folders:
        served += ", keeping " + ", ".join(map(str, s.watch_folders)) + " indexed into it"
    print(f"serving {served} on http://{args.host}:{args.port}", file=sys.stderr)
    uvicorn.run(create_app(s), host=args.host, port=args.port, log_level=args.log_level)
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
        help="keep this photo folder indexed into the served gallery (repeatable; a new "
        "gallery starts empty): photos added, changed, moved or deleted are searchable within "
        "seconds (GROUNDSEARCH_WATCH, folders separated by ':')",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
