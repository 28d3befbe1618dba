"""A photo library of a few hundred real Flickr8k photos written as phones and cameras
write them, for the page's library tests and its screenshot.

Each photo is a Flickr8k photo (the shared copies are 224 pixels square) cropped to a
landscape, portrait or square frame and enlarged to a camera-like size (1024 pixels on
its longer side), with a real EXIF block (Pillow): the date it was "taken" (trips of one
to eight photos a day over eighteen months, a few without an EXIF date, dated by their
file's time instead), one of three cameras, GPS near one of four cities for a third of
them, portraits stored turned with orientation 6 as a phone stores them; in folders by
year and month; with the photo's first Flickr8k caption. ``groundsearch index``'s own
path indexes them (``index_photos``).

Built once and kept under pytest's cache (``.pytest_cache``), keyed by what makes it (the
checkpoint, this module's settings and the source of the code that indexes and stores
it, ``groundsearch.index``), so a second run of the tests reuses it and a change to what
a gallery stores rebuilds it; ``build`` returns the photos' metadata either way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from PIL import Image

from groundsearch.common.settings import get_settings
from tests.exif_photos import Exif, write_photo

FLICKR = get_settings().flickr8k_dir
SIZE = 240
SEED = 27
CAMERAS = (("Apple", "iPhone 12"), ("Google", "Pixel 7"), ("Canon", "Canon EOS R5"))
CITIES = {"Paris": (48.8583, 2.2945), "Oslo": (59.9139, 10.7522), "Lisbon": (38.7071, -9.1355),
          "Kyoto": (35.0116, 135.7681)}  # fmt: skip
#: What makes the gallery: a cached one made otherwise is rebuilt.
VERSION = 1


def index_code() -> str:
    """A digest of the source of ``groundsearch.index``: what indexes and stores a gallery."""
    import groundsearch.index

    digest = hashlib.sha256()
    for path in sorted(Path(groundsearch.index.__file__).parent.rglob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _frame(img: Image.Image, kind: int) -> Image.Image:
    """The 224-pixel square cropped to 4:3 (kind 0), 3:4 (1) or kept square (2), enlarged."""
    w, h = img.size
    if kind == 0:
        img = img.crop((0, h // 8, w, h - h // 8)).resize((1024, 768), Image.Resampling.BICUBIC)
    elif kind == 1:
        img = img.crop((w // 8, 0, w - w // 8, h)).resize((768, 1024), Image.Resampling.BICUBIC)
    else:
        img = img.resize((800, 800), Image.Resampling.BICUBIC)
    return img


def write_library(root: Path, n: int = SIZE, seed: int = SEED) -> tuple[list[dict], Path]:
    """Write ``n`` photos under ``root/photos`` and their captions to ``root/captions.tsv``;
    returns each photo's metadata (name, path, taken as epoch seconds and ISO day,
    camera, city, folder, width and height as shown) and the captions file."""
    rng = np.random.default_rng(seed)
    names = sorted(p.name for p in (FLICKR / "Images").glob("*.jpg"))
    chosen = [names[i] for i in sorted(rng.choice(len(names), size=n, replace=False))]
    first_caption: dict[str, str] = {}
    for line in (FLICKR / "Flickr8k.token.txt").read_text().splitlines():
        key, _, text = line.partition("\t")
        first_caption.setdefault(key.split("#")[0], text.strip())
    # trips: days with one to eight photos, newest in June 2024
    moments: list[datetime] = []
    day = datetime(2024, 6, 28, 9, 0, tzinfo=UTC)
    while len(moments) < n:
        count = int(rng.integers(1, 9))
        for j in range(count):
            moments.append(day + timedelta(minutes=int(37 * j + rng.integers(0, 30))))
        day -= timedelta(days=int(rng.integers(1, 20)))
    moments = moments[:n]
    photos: list[dict] = []
    captions = []
    for i, (name, taken) in enumerate(zip(chosen, moments, strict=True)):
        kind = 0 if i % 7 < 4 else 1 if i % 7 < 6 else 2
        make, model = CAMERAS[i % 3]
        city = list(CITIES)[(i // 5) % 4] if i % 3 == 0 else None
        lat, lon = CITIES[city] if city else (None, None)
        if city:
            lat, lon = lat + float(rng.normal(0, 0.01)), lon + float(rng.normal(0, 0.01))
        dated = i % 41 != 7  # a few without an EXIF date: their file's time
        turned = kind == 1 and make != "Canon"  # a phone's portrait, stored sideways
        tags = Exif(
            original=taken.strftime("%Y:%m:%d %H:%M:%S") if dated else None,
            offset="+00:00" if dated else None,
            make=make,
            model=model,
            orientation=6 if turned else 1,
            lat=lat,
            lon=lon,
        )
        folder = root / "photos" / f"{taken.year}" / f"{taken.month:02d}"
        with Image.open(FLICKR / "Images" / name) as img:
            upright = _frame(img.convert("RGB"), kind)
        path = write_photo(folder / name, upright, tags)
        os.utime(path, (taken.timestamp(), taken.timestamp()))
        captions.append(f"{name}\t{first_caption[name]}")
        photos.append(
            {
                "name": name,
                "path": str(path),
                "taken": taken.timestamp(),
                "day": taken.date().isoformat(),
                "camera": f"{make} {model}" if not model.startswith(make) else model,
                "city": city,
                "folder": str(folder),
                "width": upright.width,
                "height": upright.height,
                "caption": first_caption[name],
            }
        )
    caption_file = root / "captions.tsv"
    caption_file.write_text("\n".join(captions) + "\n")
    return photos, caption_file


def build(cache: Path, parser, n: int = SIZE) -> tuple[Path, list[dict]]:
    """The gallery folder of the library under ``cache`` (built if missing or made
    otherwise) and its photos."""
    from groundsearch.index.ingest.indexer import index_photos
    from groundsearch.model.runtime.checkpoints import checkpoint_identity

    cache = cache.resolve()  # the gallery records its photos' absolute paths
    checkpoint = get_settings().default_checkpoint
    identity = checkpoint_identity(checkpoint)
    key = {"version": VERSION, "n": n, "seed": SEED, "root": str(cache), "code": index_code()}
    key |= identity
    marker = cache / "library.json"
    if marker.is_file():
        made = json.loads(marker.read_text())
        if made.get("key") == key and Path(made["gallery"]).is_dir():
            return Path(made["gallery"]), made["photos"]
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    photos, captions = write_library(cache, n)
    gallery = cache / "gallery"
    report = index_photos([cache / "photos"], gallery, checkpoint, parser, captions, workers=0)
    assert report.embedded == n, report.summary()
    marker.write_text(json.dumps({"key": key, "gallery": str(gallery), "photos": photos}))
    return gallery, photos
