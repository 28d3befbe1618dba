"""``groundsearch build-index``: a dataset split or the sample photos into a gallery."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from groundsearch.cli.common import (
    CliError,
    checkpoint_argument,
    checkpoint_path,
    command,
    data_option,
    data_root,
    make_parser,
    user_errors,
)
from groundsearch.settings import get_settings


def cmd_build_index(args: argparse.Namespace) -> int:
    from groundsearch.index.gallery import build_gallery
    from groundsearch.index.sample_gallery import build_sample_gallery
    from groundsearch.index.store import StoreError
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.parsing import ParseError

    s = get_settings()
    out = Path(args.out or s.gallery_dir)
    if args.sample and args.data:
        raise CliError("--sample builds the shipped sample gallery; it takes no --data")
    start = time.perf_counter()
    with user_errors(DatasetError, CheckpointError, ParseError, StoreError, ValueError):
        checkpoint, parser = checkpoint_path(args), make_parser()
        if args.sample:
            gallery = build_sample_gallery(
                checkpoint, out, parser, s.cache_dir, progress=True, kind=args.kind
            )
        else:
            gallery = build_gallery(
                checkpoint,
                data_root(args),
                args.split or None,
                out,
                parser,
                cache_dir=s.cache_dir,
                kind=args.kind,
                progress=True,
            )
    summary = {
        "gallery": str(out),
        **gallery.counts(),
        "kind": args.kind,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(summary))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from groundsearch.index.store import KINDS

    p = command(sub, "build-index", cmd_build_index, "embed a Flickr8k-layout split into a gallery")
    checkpoint_argument(p, "the joint model that embeds it")
    data_option(p)
    p.add_argument("--split", default="test", help="train/dev/test, a list file, or ''")
    p.add_argument("--out", help="gallery folder (default: CACHE_DIR/gallery)")
    p.add_argument("--kind", default=KINDS[0], choices=KINDS, help="exact (flat) or HNSW")
    p.add_argument(
        "--sample",
        action="store_true",
        help="embed the shipped sample photos (scikit-image's, our captions), not Flickr8k",
    )
