"""The gallery ``groundsearch serve`` starts with when its index folder is empty.

The Flickr8k test split (1,000 photos, 5,000 captions) when the data directory holds
Flickr8k, otherwise the shipped sample gallery (scikit-image's public-domain photos
with captions we wrote, ``index/sample_gallery.py``). An existing gallery is kept as it
is, and refused if another checkpoint built it.
"""

from __future__ import annotations

from pathlib import Path

from index.gallery import IMAGES, Gallery, checkpoint_identity, load_gallery
from model.data.flickr import CAPTIONS_FILE, IMAGES_DIR
from service.settings import ServiceSettings


def flickr8k_root(settings: ServiceSettings) -> Path | None:
    """The Flickr8k folder in the data directory, if it is there."""
    root = settings.data_dir / "flickr8k"
    return root if (root / CAPTIONS_FILE).is_file() else None


def _restore_sample_photos(gallery: Gallery, settings: ServiceSettings) -> None:
    """The sample photos live in the (rebuildable) cache: bring them back if it was
    cleared while the gallery that shows them was kept."""
    from index.sample_gallery import SAMPLE_DATA, prepare_sample_dataset

    root = settings.cache_dir / SAMPLE_DATA
    sources = {gallery.images.get(i).get("source") for i in gallery.images.ids}
    if str(root) in sources and not (root / IMAGES_DIR).is_dir():
        prepare_sample_dataset(root)


def ensure_gallery(settings: ServiceSettings, sample: bool = False) -> str:
    """Build the default gallery if the index folder has none; say what is served.

    Raises ``index.store.StoreError`` (``IdentityMismatch``) for a gallery built by
    another checkpoint.
    """
    out, checkpoint = settings.index_path, settings.checkpoint_path
    if (out / IMAGES).exists():
        gallery = load_gallery(out, checkpoint_identity(checkpoint))
        _restore_sample_photos(gallery, settings)
        return f"the gallery at {out} ({len(gallery.images)} photos)"
    root = None if sample else flickr8k_root(settings)
    if root is not None:
        from index.gallery import build_gallery

        gallery = build_gallery(
            checkpoint, root, "test", out, cache_dir=settings.cache_dir, progress=True
        )
        what = "the Flickr8k test split"
    else:
        from index.sample_gallery import build_sample_gallery

        gallery = build_sample_gallery(checkpoint, out, settings.cache_dir, progress=True)
        what = "the shipped sample gallery"
    return f"{what}, built into {out} ({len(gallery.images)} photos)"
