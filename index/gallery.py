"""A searchable gallery: a Flickr8k-layout folder embedded by a checkpoint into two stores.

    gallery = build_gallery(checkpoint, data_root, "test", out)   # images/ and captions/
    gallery = load_gallery(out, checkpoint_identity(checkpoint))  # refuses another model

Image items carry ``{"file", "captions", "source"}``; caption items ``{"text", "image",
"image_id"}`` (``image_id`` is the image's id in the image store). The identity written
with both stores names the checkpoint file's SHA-256, so a gallery never serves vectors
made by a different model.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path

from index.store import StoreError, VectorStore
from model.checkpoints import load_checkpoint
from model.corpus import build_split
from model.data import load_captioned_images
from model.images.features import FeatureExtractor
from model.parsing import Parser

IMAGES, CAPTIONS = "images", "captions"


def checkpoint_identity(checkpoint: Path) -> dict[str, str]:
    """What a gallery's vectors depend on: the checkpoint's bytes."""
    digest = hashlib.sha256()
    try:
        with open(checkpoint, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise StoreError(f"cannot read checkpoint {checkpoint}: {exc.strerror}") from None
    return {"checkpoint_sha256": digest.hexdigest()}


@dataclass
class Gallery:
    """Embedded photos and captions, searchable by inner product."""

    images: VectorStore
    captions: VectorStore

    def save(self, folder: Path) -> None:
        self.images.save(Path(folder) / IMAGES)
        self.captions.save(Path(folder) / CAPTIONS)


def build_gallery(
    checkpoint: Path,
    data_root: Path,
    split: str | None,
    out: Path,
    kind: str = "flat",
    cache_dir: Path | None = None,
    progress: bool = False,
) -> Gallery:
    """Embed a dataset split with ``checkpoint`` and save the gallery to ``out``."""
    parser = Parser()
    model = load_checkpoint(checkpoint, parser=parser.version)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=cache_dir)
    ds = load_captioned_images(data_root, split=split)
    split_data = build_split(ds, parser, extractor, progress=progress)
    if progress:
        print(f"embedding {len(ds.images)} photos and {len(ds.captions)} captions", file=sys.stderr)
    v = model.embed_images(split_data.features)
    y = model.embed_sentences(split_data.trees)
    identity = checkpoint_identity(checkpoint)
    images = VectorStore(v.shape[1], kind, identity)
    by_image: list[list[str]] = [[] for _ in ds.images]
    for text, row in zip(ds.captions, ds.caption_image, strict=True):
        by_image[row].append(text)
    image_ids = images.add(
        v,
        [
            {"file": image, "captions": caps, "source": str(data_root)}
            for image, caps in zip(ds.images, by_image, strict=True)
        ],
    )
    captions = VectorStore(y.shape[1], kind, identity)
    captions.add(
        y,
        [
            {"text": text, "image": ds.images[row], "image_id": image_ids[row]}
            for text, row in zip(ds.captions, ds.caption_image, strict=True)
        ],
    )
    gallery = Gallery(images, captions)
    gallery.save(out)
    return gallery


def load_gallery(folder: Path, identity: dict[str, str] | None = None) -> Gallery:
    """A saved gallery; StoreError (IdentityMismatch) if it was built by another model."""
    folder = Path(folder)
    if not folder.is_dir():
        raise StoreError(f"no gallery at {folder} (build one with `groundsearch build-index`)")
    return Gallery(
        VectorStore.load(folder / IMAGES, identity), VectorStore.load(folder / CAPTIONS, identity)
    )
