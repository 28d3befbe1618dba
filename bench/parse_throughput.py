"""Parser throughput: all Flickr8k captions batched, and short captions one at a time.

    python bench/parse_throughput.py                 # full corpus (40,460 captions)
    python bench/parse_throughput.py --limit 2000    # a quicker look

Runs without the parse cache so every caption is really parsed. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import time
from pathlib import Path

import torch

from groundsearch.model.runtime.parsing import Parser
from groundsearch.settings import get_settings


def flickr_captions(data_dir: Path) -> list[str]:
    path = data_dir / "flickr8k" / "Flickr8k.token.txt"
    if not path.exists():
        raise SystemExit(f"captions not found: {path} (set GROUNDSEARCH_DATA_DIR)")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split("\t", 1)[1] for line in lines if "\t" in line]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=int, default=0, help="only the first N captions")
    ap.add_argument("--single", type=int, default=300, help="captions parsed one at a time")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="processes for the batched corpus run (1 = in this process)",
    )
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    settings = get_settings()
    captions = flickr_captions(settings.data_dir)
    if args.limit:
        captions = captions[: args.limit]
    parser = Parser(settings.parser_dir, settings.cache_dir, use_cache=False)
    start = time.perf_counter()
    parser.pipeline  # noqa: B018 - load the models before timing
    load_s = time.perf_counter() - start

    # short captions (at most 12 words) one at a time: the service's query path
    pool = sorted({c for c in captions if len(c.split()) <= 12})
    short = random.Random(0).sample(pool, min(args.single, len(pool)))
    parser.parse(short[:5])  # warm-up
    lat = []
    for text in short:
        t0 = time.perf_counter()
        parser.parse_one(text)
        lat.append(1000 * (time.perf_counter() - t0))
    lat.sort()

    t0 = time.perf_counter()
    trees = parser.parse(captions, batch_size=args.batch_size, workers=args.workers)
    batched_s = time.perf_counter() - t0

    print(
        json.dumps(
            {
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "torch_threads": args.threads,
                "workers": args.workers,
                "parser": parser.version,
                "load_seconds": round(load_s, 2),
                "batched": {
                    "captions": len(captions),
                    "seconds": round(batched_s, 1),
                    "captions_per_s": round(len(captions) / batched_s, 1),
                    "words": sum(len(t) for t in trees),
                },
                "single": {
                    "captions": len(short),
                    "mean_words": round(statistics.mean(len(t.split()) for t in short), 1),
                    "p50_ms": round(lat[len(lat) // 2], 1),
                    "p90_ms": round(lat[int(len(lat) * 0.9)], 1),
                    "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 1),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
