"""``groundsearch index``: photo folders (and optional captions) into a gallery."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from groundsearch.cli.common import (
    CliError,
    checkpoint_path,
    command,
    make_parser,
    user_errors,
)
from groundsearch.settings import get_settings

EPILOG = """\
examples:
  groundsearch index ~/Photos                       # then: groundsearch serve
  groundsearch index ~/Photos --captions captions.tsv --index ~/galleries/photos
  groundsearch index --flickr8k --split test        # the Flickr8k test split, its captions
  groundsearch index --sample                       # the shipped sample photos
  groundsearch index /shared/photos --ray auto      # embed on a running Ray cluster

A captions file is TSV (photo<TAB>caption; Flickr8k's "name.jpg#0" keys work) or JSONL
({"photo": ..., "caption": ...} or "captions": [...]); photos are matched by their path
relative to the captions file or to a folder being indexed, or by their file name.
A second run embeds only new or changed files; files gone from the folders are
forgotten. Every file that cannot be used is listed with its reason.

--ray ADDRESS embeds on a Ray cluster (Ray Data actors; pip install 'groundsearch[ray]'):
"local" starts one on this machine, "auto" joins the running one, anything else is
passed to ray.init (e.g. ray://head:10001). Every node must see the photos at the same
paths (a shared filesystem) and have groundsearch installed; this machine writes the
gallery.
"""


def cmd_index(args: argparse.Namespace) -> int:
    from groundsearch.index.caption_files import CaptionFileError
    from groundsearch.index.defaults import Preset, flickr8k_preset, read_list, sample_preset
    from groundsearch.index.errors import StoreError
    from groundsearch.index.indexer import IndexingError, index_photos
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.images.ray_pool import RayClusterError
    from groundsearch.model.runtime.parsing import ParseError

    s = get_settings()
    gallery = Path(args.index or s.gallery_dir)
    if args.migrate:
        from groundsearch.index.migrate import migrate_legacy

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
    with user_errors(
        CaptionFileError,
        CheckpointError,
        IndexingError,
        ParseError,
        RayClusterError,
        StoreError,
        OSError,
    ):
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
        )
    for line in report.lines():
        print(line, file=sys.stderr)
    if report.found == 0:
        print("no photo files found in " + ", ".join(map(str, preset.paths)), file=sys.stderr)
    print(json.dumps(report.summary()))
    return 0


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from groundsearch.index.index_kinds import AUTO, KINDS

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
        choices=(AUTO, *KINDS),
        help="a new gallery's search index: exact (flat), HNSW, compressed on disk (ivfpq), "
        "or auto: by size (default)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--migrate", action="store_true", help="move an old-format gallery into a database"
    )
    p.add_argument("--flickr8k", action="store_true", help="Flickr8k's photos and captions")
    p.add_argument("--data", type=Path, help="with --flickr8k: a Flickr8k-layout folder")
    p.add_argument("--split", default="test", help="with --flickr8k: train/dev/test, a list, ''")
    p.add_argument("--sample", action="store_true", help="the shipped sample photos and captions")
