"""What decoding a phone's 12-megapixel HEIC or AVIF costs, beside the same photo as a JPEG
and one photo's CNN pass in the same run (issue 27, item 1).

    python bench/phone_formats.py [--photos 3] [--repeats 5]

The photos: the first ``--photos`` Flickr8k test photos scaled to a phone's 12 MP
(4032×3024, bicubic) and stored as a phone stores them — turned a quarter with EXIF
orientation 6 and a phone's EXIF block — as a JPEG (quality 90), a HEIC (pillow-heif,
quality 80, x265's default preset) as one picture, as an iPhone lays it out (a grid of
512-pixel tiles and a 320×240 thumbnail) and with a 512×384 thumbnail (what pillow-heif's
draft decodes instead of the photo: one at least ``min_side`` on both sides), and an
AVIF (pillow-avif-plugin, quality 80, default speed). Per photo, the files in the page
cache, one untimed pass, then the median of ``--repeats`` passes of:

* ``decode_photo(path, min_side=292)``: what the indexer's workers and the service's
  upload reader run (JPEG: DCT-scaled draft; HEIF: a large enough embedded thumbnail when
  there is one; then turned upright and box-reduced by a whole factor);
* ``decode_photo(path)``: the full decode (reference);
* ``read_metadata(path)``: the headers and EXIF block (what the indexer adds per file);
* once, one CNN pass: EfficientNet-Lite2 (``FeatureExtractor.embed_images``) on one
  decoded photo, what follows the decode in the indexer's workers.

Twice: with the decoders' own thread counts (libheif 4, libavif/dav1d one per core) and
with one decoder thread each (a feature-pool worker's share: one process per core).
torch on one thread. Prints one JSON object: medians in ms and the sizes in MB.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pillow_heif
import torch
from PIL import Image

from groundsearch.common.settings import get_settings
from groundsearch.index.store.photo_metadata import read_metadata
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.images.photos import decode_photo

sys.path.insert(0, str(Path(__file__).parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests.oriented
from common import median_ms, phone_exif
from tests.oriented import as_stored

SIZE = (4032, 3024)


def per_photo_ms(paths: list[Path], fn: Callable[[Path], object], repeats: int) -> float:
    """The median over ``repeats`` passes of the mean time per photo, after one pass."""

    def one_pass() -> None:
        for p in paths:
            fn(p)

    return median_ms(one_pass, repeats, per=len(paths))


#: How each kind of file is written: suffix, Pillow's format, its options.
KINDS: dict[str, tuple[str, str, dict[str, object]]] = {
    "JPEG (quality 90)": ("jpg", "JPEG", {"quality": 90}),
    "HEIC (quality 80, one picture)": ("heic", "HEIF", {"quality": 80}),
    "HEIC (quality 80, 512-px grid tiles, 320×240 thumbnail: an iPhone's layout)": (
        "heic",
        "HEIF",
        {"quality": 80, "tile_size": 512, "thumbnails": [320]},
    ),
    "HEIC (quality 80, one picture, 512×384 thumbnail)": (
        "heic",
        "HEIF",
        {"quality": 80, "thumbnails": [512]},
    ),
    "AVIF (quality 80)": ("avif", "AVIF", {"quality": 80}),
}


def set_decoder_threads(threads: int | None) -> None:
    """libheif's and libavif's decoding threads (None: their defaults)."""
    from pillow_avif import AvifImagePlugin

    pillow_heif.options.DECODE_THREADS = 4 if threads is None else threads
    AvifImagePlugin.DEFAULT_MAX_THREADS = 0 if threads is None else threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    settings = get_settings()
    names = sorted((settings.flickr8k_dir / "Flickr_8k.testImages.txt").read_text().split())
    flickr = [settings.flickr8k_dir / "Images" / n for n in names[: args.photos]]
    model = load_checkpoint(settings.default_checkpoint)
    extractor = FeatureExtractor.for_identity(model.backbone)
    side = extractor.spec.resize
    result: dict[str, object] = {
        "machine": f"{os.cpu_count()} CPUs, torch {torch.__version__} on 1 thread, "
        f"load average {os.getloadavg()[0]:.2f} at the start",
        "libheif": pillow_heif.libheif_version(),
        "backbone": model.backbone,
        "min_side": side,
    }
    # bytes: pillow-heif writes orientation 6 as the HEIF's rotation
    exif = phone_exif("iPhone 15 Pro").tobytes()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        files: dict[str, list[Path]] = {kind: [] for kind in KINDS}
        encode_s: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        for i, source in enumerate(flickr):
            with Image.open(source) as img:
                photo = img.convert("RGB").resize(SIZE, Image.Resampling.BICUBIC)
            stored = as_stored(photo, 6)
            for j, (kind, (suffix, fmt, options)) in enumerate(KINDS.items()):
                path = work / f"{i}-{j}.{suffix}"
                start = time.perf_counter()
                stored.save(path, format=fmt, exif=exif, **options)
                encode_s[kind] += time.perf_counter() - start
                files[kind].append(path)
        for kind, paths in files.items():  # each one upright, read back whole
            img, _ = decode_photo(paths[0])
            assert img.size == SIZE, (kind, img.size)
            assert read_metadata(paths[0]).camera == "Apple iPhone 15 Pro", kind

        decoded = [decode_photo(p, min_side=side)[0] for p in files["JPEG (quality 90)"]]
        start = time.perf_counter()
        for _ in range(args.repeats):
            for img in decoded:
                extractor.embed_images([img])
        cnn_ms = 1000 * (time.perf_counter() - start) / args.repeats / len(decoded)
        result["one CNN pass (EfficientNet-Lite2 on one decoded photo) ms"] = round(cnn_ms, 1)

        runs = {}
        for threads, label in ((None, "decoders' own threads"), (1, "one decoder thread")):
            set_decoder_threads(threads)
            rows = {}
            for kind, paths in files.items():
                small = decode_photo(paths[0], min_side=side)[0].size
                draft = per_photo_ms(paths, lambda p: decode_photo(p, min_side=side), args.repeats)
                rows[kind] = {
                    "MB": round(sum(p.stat().st_size for p in paths) / len(paths) / 1e6, 2),
                    "decode_photo(min_side) ms": draft,
                    "decoded size": f"{small[0]}×{small[1]}",
                    "decode / CNN pass": round(draft / cnn_ms, 2),
                    "decode_photo (full) ms": per_photo_ms(paths, decode_photo, args.repeats),
                    "read_metadata ms": per_photo_ms(paths, read_metadata, args.repeats),
                }
            runs[label] = rows
        result["per_photo"] = runs
        result["encode s per photo (writing the files, reference)"] = {
            k: round(v / len(flickr), 2) for k, v in encode_s.items()
        }
    set_decoder_threads(None)
    result["load average at the end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
