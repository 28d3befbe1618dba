"""What reading a photo's metadata costs at indexing time, beside one photo's CNN pass in
the same run (issue 26, item 1).

    python bench/photo_metadata.py [--flickr 200] [--exif 20] [--big 4] [--repeats 3]

The photos: the first ``--flickr`` Flickr8k test photos as they are (JPEGs of about
500×375 with no EXIF block: ``read_metadata`` falls back to the file's time), ``--exif``
of the next ones re-saved with a phone's EXIF block (DateTimeOriginal with its offset,
Make/Model, orientation 6, a GPS IFD of rationals; Pillow writes it) and ``--big``
12-megapixel phone-sized JPEGs (4032×3024, the same EXIF block). Per photo, on one
thread, each measured ``--repeats`` times after one untimed pass (the files in the page
cache, as the indexer finds them right after hashing), the median per photo of:

* ``read_metadata(path)``: what ``groundsearch index`` adds per new or changed file
  (its headers and EXIF block; no pixel decoded);
* ``read_upload_metadata(bytes)``: what an upload adds;
* ``sha256_file(path)``: what the indexer already does to every new file (reference);
* one photo's CNN pass as the indexer's workers run it: ``decode_photo`` at the
  backbone's ``min_side`` and ``FeatureExtractor.embed_images`` of that one photo.

Prints one JSON object: per group of photos the medians (ms) and metadata / CNN in %.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from PIL import Image

from groundsearch.common.files import sha256_file
from groundsearch.common.settings import get_settings
from groundsearch.index.store.photo_metadata import read_metadata, read_upload_metadata
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.images.photos import decode_photo

sys.path.insert(0, str(Path(__file__).parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests.oriented
from common import phone_exif
from tests.oriented import as_stored


def with_exif(photo: Image.Image, path: Path) -> Path:
    """``photo`` stored as a phone stores it (turned, orientation 6) with its EXIF."""
    as_stored(photo.convert("RGB"), 6).save(
        path, "JPEG", quality=90, exif=phone_exif("iPhone 12", "2024:07:02 09:00:00")
    )
    return path


def per_photo_ms(paths: list[Path], work: Callable[[Path], object], repeats: int) -> float:
    """The median over photos of each photo's median time (ms), after an untimed pass."""
    for path in paths:
        work(path)
    medians = []
    for path in paths:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            work(path)
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return round(1000 * statistics.median(medians), 4)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--flickr", type=int, default=200, help="Flickr8k photos as they are")
    ap.add_argument("--exif", type=int, default=20, help="Flickr8k photos with a phone's EXIF")
    ap.add_argument("--big", type=int, default=4, help="12-megapixel JPEGs with a phone's EXIF")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    torch.set_num_threads(1)
    settings = get_settings()
    model = load_checkpoint(settings.default_checkpoint)
    extractor = FeatureExtractor.for_identity(model.backbone)  # no cache: every pass runs
    side = extractor.spec.resize
    names = sorted((settings.flickr8k_dir / "Flickr_8k.testImages.txt").read_text().split())
    flickr = [settings.flickr8k_dir / "Images" / n for n in names]

    def cnn(path: Path) -> object:
        img, _ = decode_photo(path, min_side=side)
        return extractor.embed_images([img])

    result: dict[str, object] = {
        "machine": f"{os.cpu_count()} CPUs, torch {torch.__version__} on 1 thread, "
        f"load average {os.getloadavg()[0]:.2f} at the start",
        "backbone": model.backbone,
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rich = [
            with_exif(Image.open(p), work / f"exif-{i}.jpg")
            for i, p in enumerate(flickr[args.flickr : args.flickr + args.exif])
        ]
        big = []
        for i, p in enumerate(flickr[: args.big]):
            photo = Image.open(p).convert("RGB").resize((4032, 3024), Image.Resampling.BICUBIC)
            big.append(with_exif(photo, work / f"big-{i}.jpg"))
        groups = {
            f"Flickr8k, no EXIF ({args.flickr})": flickr[: args.flickr],
            f"Flickr8k + a phone's EXIF block ({args.exif})": rich,
            f"12 MP (4032×3024) + a phone's EXIF block ({args.big})": big,
        }
        rows = {}
        for label, paths in groups.items():
            assert all(read_metadata(p).width for p in paths), label
            data = {p: p.read_bytes() for p in paths}
            row = {
                "read_metadata": per_photo_ms(paths, read_metadata, args.repeats),
                "read_upload_metadata (bytes)": per_photo_ms(
                    paths, lambda p, d=data: read_upload_metadata(d[p], p.name), args.repeats
                ),
                "sha256_file (reference)": per_photo_ms(paths, sha256_file, args.repeats),
                f"CNN pass: decode_photo + {model.backbone}": per_photo_ms(
                    paths, cnn, max(1, args.repeats // 3)
                ),
            }
            row["metadata / CNN pass, %"] = round(
                100 * row["read_metadata"] / row[f"CNN pass: decode_photo + {model.backbone}"], 3
            )
            rows[label] = row
        result["per_photo_ms"] = rows
        sample = read_metadata(rich[0]) if rich else None
        result["an EXIF-rich photo reads as"] = None if sample is None else sample.__dict__
    result["load average at the end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
