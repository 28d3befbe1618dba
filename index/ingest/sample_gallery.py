"""The shipped default gallery: sample photos copied from the installed scikit-image
wheel's ``data`` folder (no download; grayscale and transparent ones as RGB PNGs),
captioned by ``sample_captions.txt``.

Provenance, per ``skimage.data``'s docstrings (scikit-image 0.26): CC0 by the
photographer: ``camera.png`` (Lav Varshney), ``chelsea.png`` (Stefan van der Walt),
``coffee.png`` (Rachel Michetti); CC0 at the source: ``brick.png``, ``gravel.png``
(CC0Textures), ``grass.png`` (DeviantArt, linolafett), ``horse.png`` (openclipart,
Andreas Preuss), ``retina.jpg`` (Wikimedia Commons, Mikael Häggström); public domain:
``astronaut.png`` (NASA), ``rocket.jpg`` (SpaceX), ``hubble_deep_field.jpg`` (NASA),
``clock_motion.png`` (Stefan van der Walt), ``text.png`` (Wikipedia's Corner.png); no
known copyright restrictions: ``coins.png`` (Brooklyn Museum), ``ihc.png`` (CMMI).
Photos without a licence statement, and synthetic or tiny images, are left out.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from PIL import Image

from groundsearch.common.files import atomic_path, write_text
from groundsearch.model.data import DatasetError, read_caption_ids
from groundsearch.model.data.flickr import CAPTIONS_FILE, IMAGES_DIR
from groundsearch.model.runtime.images.photos import upright

SAMPLE_CAPTIONS = Path(__file__).with_name("sample_captions.txt")
SAMPLE_DATA = "sample-data"


def skimage_data_dir() -> Path:
    """The ``data`` folder inside the installed scikit-image package."""
    import skimage

    return Path(skimage.__file__).resolve().parent / "data"


def sample_photos() -> list[str]:
    """The skimage data file names the shipped captions describe, sorted."""
    ids = read_caption_ids(SAMPLE_CAPTIONS.parent, SAMPLE_CAPTIONS.name)
    return sorted({key.rpartition("#")[0] for key in ids})


def _copy_photo(src: Path, dest: Path) -> None:
    """Copy ``src`` to ``dest``: RGB as is, else upright and RGB (alpha on white)."""
    with Image.open(src) as img:
        mode, fmt = img.mode, img.format
        if mode == "RGB":
            with atomic_path(dest) as tmp:
                shutil.copyfile(src, tmp)
            return
        img.load()
        turned = upright(img)
        if mode in ("RGBA", "LA") or (mode == "P" and "transparency" in img.info):
            rgba = turned.convert("RGBA")
            rgb = Image.new("RGB", rgba.size, (255, 255, 255))
            rgb.paste(rgba, mask=rgba.getchannel("A"))
        else:
            rgb = turned.convert("RGB")
    with atomic_path(dest) as tmp:
        rgb.save(tmp, format=fmt or "PNG")


def prepare_sample_dataset(root: Path) -> Path:
    """Write a Flickr8k-layout folder of the sample photos and captions at ``root``
    (idempotent); DatasetError if the installed scikit-image lacks a photo."""
    root = Path(root).resolve()
    images = root / IMAGES_DIR
    images.mkdir(parents=True, exist_ok=True)
    data_dir = skimage_data_dir()
    for name in sample_photos():
        dest = images / name
        if dest.is_file():
            continue
        src = data_dir / name
        if not src.is_file():
            raise DatasetError(f"sample photo {name} not found in {data_dir}")
        _copy_photo(src, dest)
    text = SAMPLE_CAPTIONS.read_text(encoding="utf-8")
    token = root / CAPTIONS_FILE
    if not token.is_file() or token.read_text(encoding="utf-8") != text:
        write_text(token, text)
    return root
