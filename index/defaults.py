"""The gallery ``groundsearch serve`` starts with when its index folder is empty.

The Flickr8k test split (1,000 photos, 5,000 captions) when the data folder holds
Flickr8k, otherwise the shipped sample gallery (scikit-image's public-domain photos
with captions we wrote, ``index/sample_gallery.py``). An existing gallery is kept as it
is, and refused if another checkpoint built it.
"""

from __future__ import annotations

from pathlib import Path

from groundsearch.index.gallery import IMAGES, Gallery, build_gallery, checkpoint_identity
from groundsearch.index.sample_gallery import (
    SAMPLE_DATA,
    build_sample_gallery,
    prepare_sample_dataset,
)
from groundsearch.model.data.flickr import CAPTIONS_FILE, IMAGES_DIR
from groundsearch.model.runtime.parsing import Parser


def has_flickr8k(root: Path) -> bool:
    """Whether ``root`` holds Flickr8k (its captions file)."""
    return (Path(root) / CAPTIONS_FILE).is_file()


def _restore_sample_photos(gallery: Gallery, cache_dir: Path) -> None:
    """The sample photos live in the (rebuildable) cache: bring them back if it was
    cleared while the gallery that shows them was kept."""
    root = cache_dir / SAMPLE_DATA
    sources = {record.source for record in gallery.image_records()}
    if str(root) in sources and not (root / IMAGES_DIR).is_dir():
        prepare_sample_dataset(root)


def ensure_gallery(
    checkpoint: Path,
    folder: Path,
    parser: Parser,
    cache_dir: Path,
    flickr8k: Path | None,
    sample: bool = False,
) -> str:
    """Build the default gallery in ``folder`` if it has none; say what is served.

    ``flickr8k``: the Flickr8k folder to build from when it is there (``sample`` builds
    the sample gallery anyway). Raises ``StoreError`` (``IdentityMismatch``) for a
    gallery built by another checkpoint.
    """
    if (folder / IMAGES).exists():
        gallery = Gallery.open(folder, checkpoint_identity(checkpoint))
        _restore_sample_photos(gallery, cache_dir)
        return f"the gallery at {folder} ({len(gallery.images)} photos)"
    if not sample and flickr8k is not None and has_flickr8k(flickr8k):
        gallery = build_gallery(
            checkpoint, flickr8k, "test", folder, parser, cache_dir=cache_dir, progress=True
        )
        what = "the Flickr8k test split"
    else:
        gallery = build_sample_gallery(checkpoint, folder, parser, cache_dir, progress=True)
        what = "the shipped sample gallery"
    return f"{what}, built into {folder} ({len(gallery.images)} photos)"
