"""A gallery: embedded photos and captions in two vector stores, as typed records.

    gallery = build_gallery(checkpoint, data_root, "test", out, parser, cache_dir)
    gallery = Gallery.open(out, checkpoint_identity(checkpoint))   # refuses another model
    gallery.search_images(vector, k)            # [(ImageRecord, score), …]
    gallery.add_photo(data, "jpg", vector, captions, caption_vectors)
    gallery.remove_photo(image_id)

A gallery folder holds ``images/`` and ``captions/`` (``VectorStore`` folders) and
``uploads/`` (photos added through the API; dataset photos stay where they are). The
identity written with both stores names the checkpoint file's SHA-256, so a gallery
never serves vectors made by a different model.

Writes are serialised and persisted at once, ordered so that a crash between the two
store saves never leaves a caption pointing at a missing photo: an addition writes the
photo file, then the image store, then the caption store; a removal saves the caption
store first.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from groundsearch.files import atomic_path
from groundsearch.index.store import StoreError, UnknownItemError, VectorStore
from groundsearch.model.data import load_captioned_images
from groundsearch.model.data.flickr import IMAGES_DIR
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.parsing import Parser

IMAGES, CAPTIONS, UPLOADS = "images", "captions", "uploads"
#: The ``source`` of a photo uploaded through the API (kept in the gallery's uploads/).
UPLOAD_SOURCE = "upload"


@dataclass(frozen=True)
class ImageRecord:
    """A gallery photo: its file, where it came from and its captions' texts.

    ``source`` is the dataset folder the photo lives in (its file is
    ``source/Images/file``) or ``"upload"`` (its file is ``uploads/…`` in the gallery).
    """

    id: int
    file: str
    source: str
    captions: tuple[str, ...] = ()

    @property
    def uploaded(self) -> bool:
        return self.source == UPLOAD_SOURCE

    def meta(self) -> dict[str, Any]:
        return {"file": self.file, "captions": list(self.captions), "source": self.source}

    @classmethod
    def from_meta(cls, item_id: int, meta: dict[str, Any]) -> ImageRecord:
        return cls(item_id, meta["file"], meta["source"], tuple(meta.get("captions", ())))


@dataclass(frozen=True)
class CaptionRecord:
    """A gallery caption and the photo it describes (``image`` is that photo's file)."""

    id: int
    text: str
    image_id: int
    image: str

    def meta(self) -> dict[str, Any]:
        return {"text": self.text, "image": self.image, "image_id": self.image_id}

    @classmethod
    def from_meta(cls, item_id: int, meta: dict[str, Any]) -> CaptionRecord:
        return cls(item_id, meta["text"], int(meta["image_id"]), meta["image"])


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


class Gallery:
    """Embedded photos and captions in ``folder``, searchable by inner product."""

    def __init__(self, folder: Path, images: VectorStore, captions: VectorStore) -> None:
        self.folder, self.images, self.captions = Path(folder), images, captions
        self._captions_of: dict[int, list[int]] = {}
        for cid in captions.ids:
            self._captions_of.setdefault(int(captions.get(cid)["image_id"]), []).append(cid)
        self._write_lock = threading.Lock()

    @classmethod
    def create(
        cls, folder: Path, dim: int, identity: dict[str, str], kind: str = "flat"
    ) -> Gallery:
        """An empty gallery (written by the first ``save``)."""
        return cls(folder, VectorStore(dim, kind, identity), VectorStore(dim, kind, identity))

    @classmethod
    def open(cls, folder: Path, identity: dict[str, str] | None = None) -> Gallery:
        """A saved gallery; StoreError (IdentityMismatch) if another model built it."""
        folder = Path(folder)
        if not folder.is_dir():
            raise StoreError(f"no gallery at {folder} (build one with `groundsearch build-index`)")
        return cls(
            folder,
            VectorStore.load(folder / IMAGES, identity),
            VectorStore.load(folder / CAPTIONS, identity),
        )

    def save(self) -> None:
        """Write both stores (each atomically)."""
        self.images.save(self.folder / IMAGES)
        self.captions.save(self.folder / CAPTIONS)

    def counts(self) -> dict[str, int]:
        return {"images": len(self.images), "captions": len(self.captions)}

    # --- reading ------------------------------------------------------------------------

    def image(self, image_id: int) -> ImageRecord:
        """The photo's record; UnknownItemError if there is none."""
        return ImageRecord.from_meta(image_id, self.images.get(image_id))

    def caption(self, caption_id: int) -> CaptionRecord:
        return CaptionRecord.from_meta(caption_id, self.captions.get(caption_id))

    def image_records(self) -> Iterator[ImageRecord]:
        for image_id in self.images.ids:
            yield self.image(image_id)

    def captions_of(self, image_id: int) -> list[CaptionRecord]:
        """The captions of a photo (from an index kept beside the store, not a scan)."""
        return [self.caption(cid) for cid in self._captions_of.get(image_id, [])]

    def image_vector(self, image_id: int) -> np.ndarray:
        return self.images.vector(image_id)

    def photo_path(self, image_id: int) -> Path:
        """The photo's file; UnknownItemError if the item or its file is gone."""
        record = self.image(image_id)
        if record.uploaded:
            path = self.folder / record.file
        else:
            path = Path(record.source) / IMAGES_DIR / record.file
        if not path.is_file():
            raise UnknownItemError(f"the photo of image {image_id} is no longer on disk")
        return path

    def search_images(self, query: np.ndarray, k: int) -> list[tuple[ImageRecord, float]]:
        """The ``k`` photos with the largest inner product with ``query`` (one vector)."""
        hits = self.images.search(np.asarray(query)[None, :], k)[0]
        return [(ImageRecord.from_meta(i, meta), score) for i, score, meta in hits]

    def search_captions(self, query: np.ndarray, k: int) -> list[tuple[CaptionRecord, float]]:
        hits = self.captions.search(np.asarray(query)[None, :], k)[0]
        return [(CaptionRecord.from_meta(i, meta), score) for i, score, meta in hits]

    def similar_images(self, image_id: int, k: int) -> list[tuple[ImageRecord, float]]:
        """The ``k`` photos nearest to a gallery photo, itself left out."""
        hits = self.search_images(self.image_vector(image_id), k + 1)
        return [h for h in hits if h[0].id != image_id][:k]

    # --- writing ------------------------------------------------------------------------

    def add_images(
        self,
        vectors: np.ndarray,
        records: Sequence[ImageRecord],
        caption_vectors: np.ndarray | None = None,
        captions: Sequence[tuple[int, str]] = (),
    ) -> tuple[list[int], list[int]]:
        """Add photos (their ``id`` fields are ignored) and captions, given as ``(row of
        the photo in records, text)``; returns the new image and caption ids. Not saved."""
        with self._write_lock:
            image_ids = self.images.add(vectors, [r.meta() for r in records])
            caption_ids: list[int] = []
            if captions:
                metas = [
                    CaptionRecord(0, text, image_ids[row], records[row].file).meta()
                    for row, text in captions
                ]
                caption_ids = self.captions.add(_required(caption_vectors), metas)
                for cid, meta in zip(caption_ids, metas, strict=True):
                    self._captions_of.setdefault(meta["image_id"], []).append(cid)
        return image_ids, caption_ids

    def add_photo(
        self,
        data: bytes,
        extension: str,
        vector: np.ndarray,
        captions: Sequence[str] = (),
        caption_vectors: np.ndarray | None = None,
    ) -> tuple[int, list[int]]:
        """Keep an uploaded photo in ``uploads/`` (named by its content) and add it with
        its captions; persisted before it returns. Returns the image and caption ids."""
        name = f"{hashlib.sha256(data).hexdigest()[:20]}.{extension}"
        file = f"{UPLOADS}/{name}"
        record = ImageRecord(0, file, UPLOAD_SOURCE, tuple(captions))
        with self._write_lock:
            path = self.folder / file
            if not path.exists():
                with atomic_path(path) as tmp, open(tmp, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
            image_id = self.images.add(vector[None, :], [record.meta()])[0]
            self.images.save(self.folder / IMAGES)
            caption_ids: list[int] = []
            if captions:
                metas = [CaptionRecord(0, t, image_id, file).meta() for t in captions]
                caption_ids = self.captions.add(_required(caption_vectors), metas)
                self._captions_of[image_id] = list(caption_ids)
                self.captions.save(self.folder / CAPTIONS)
        return image_id, caption_ids

    def remove_photo(self, image_id: int) -> int:
        """Remove a photo and its captions (and an uploaded photo's file once no item
        uses it), persisted before it returns; returns how many captions went."""
        with self._write_lock:
            record = self.image(image_id)
            doomed = self._captions_of.pop(image_id, [])
            for cid in doomed:
                self.captions.remove(cid)
            if doomed:
                self.captions.save(self.folder / CAPTIONS)
            self.images.remove(image_id)
            self.images.save(self.folder / IMAGES)
            if record.uploaded and not any(r.file == record.file for r in self.image_records()):
                (self.folder / record.file).unlink(missing_ok=True)
        return len(doomed)


def _required(vectors: np.ndarray | None) -> np.ndarray:
    if vectors is None:
        raise ValueError("captions were given without their vectors")
    return vectors


def build_gallery(
    checkpoint: Path,
    data_root: Path,
    split: str | None,
    out: Path,
    parser: Parser,
    cache_dir: Path | None = None,
    kind: str = "flat",
    progress: bool = False,
) -> Gallery:
    """Embed a Flickr8k-layout dataset split with ``checkpoint`` into a gallery at ``out``
    (``cache_dir``: the image feature cache, None for none)."""
    model = load_checkpoint(checkpoint, parser=parser.version)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=cache_dir)
    ds = load_captioned_images(data_root, split=split)
    trees = parser.parse(list(ds.captions), workers=os.cpu_count() or 1)
    features = extractor.embed_files(
        [ds.image_path(i) for i in range(len(ds.images))], progress=progress
    )
    if progress:
        print(f"embedding {len(ds.images)} photos and {len(ds.captions)} captions", file=sys.stderr)
    v = model.embed_images(features)
    y = model.embed_sentences(trees)
    gallery = Gallery.create(out, int(v.shape[1]), checkpoint_identity(checkpoint), kind)
    by_image: list[list[str]] = [[] for _ in ds.images]
    for text, row in zip(ds.captions, ds.caption_image, strict=True):
        by_image[row].append(text)
    records = [
        ImageRecord(0, image, str(data_root), tuple(texts))
        for image, texts in zip(ds.images, by_image, strict=True)
    ]
    gallery.add_images(v, records, y, list(zip(ds.caption_image, ds.captions, strict=True)))
    gallery.save()
    return gallery
