"""Captioned collections to train on, by what the path holds: ``flickr8k``, ``features``
(like ``cc-web/``: ``captions.tsv``, split lists, ``features/<backbone>.npy``) or
``captions`` (split by a hash of the name); ``NAME=W`` weighs a source by W."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from groundsearch.model.data.caption_files import CaptionFileError, read_caption_file
from groundsearch.model.data.flickr import (
    CAPTIONS_FILE,
    CaptionedImages,
    DatasetError,
    collection,
    load_captioned_images,
)

#: The data folder's collections, by name.
NAMED = {"flickr8k": "flickr8k", "cc-web": "cc-web"}
#: The splits of a captions file's photos: hash of the name mod 10 → split.
HASH_SPLITS = {0: "dev", 1: "test"}


@dataclass(frozen=True)
class Source:
    """One captioned collection: its name, kind, path and weight in the mix."""

    name: str
    kind: str
    path: Path
    weight: float = 1.0

    def __str__(self) -> str:
        return self.name if self.weight == 1 else f"{self.name}={self.weight:g}"


def parse_source(text: str, data_dir: Path) -> Source:
    """``flickr8k``, ``cc-web``, a folder or a captions file, optionally ``=WEIGHT``."""
    spec, eq, weight_text = text.rpartition("=")
    if not eq:
        spec, weight_text = text, "1"
    try:
        weight = float(weight_text)
    except ValueError:
        raise DatasetError(f"source {text!r}: the weight after '=' is not a number") from None
    if not weight > 0 or weight == float("inf"):
        raise DatasetError(f"source {text!r}: the weight must be a positive number")
    path = Path(data_dir) / NAMED[spec] if spec in NAMED else Path(spec).expanduser()
    return Source(spec if spec in NAMED else path.name, source_kind(path), path, weight)


def source_kind(path: Path) -> str:
    """The kind of collection at ``path`` (DatasetError when it is none of them)."""
    if path.is_dir() and (path / CAPTIONS_FILE).is_file():
        return "flickr8k"
    if path.is_dir() and (path / "captions.tsv").is_file() and (path / "features").is_dir():
        return "features"
    if path.is_file():
        return "captions"
    if not path.exists():
        raise DatasetError(f"source not found: {path}")
    raise DatasetError(
        f"{path}: not a collection (a Flickr8k-layout folder, a folder of captions.tsv and "
        "features/, or a captions file)"
    )


def load_source(source: Source, split: str | None, backbone: str = "") -> CaptionedImages:
    """The photos and captions of one split of ``source`` (None: all), a features
    collection's read for ``backbone`` (default: the only one it has)."""
    if source.kind == "flickr8k":
        return load_captioned_images(source.path, split=split)
    if source.kind == "features":
        return _load_features(source.path, split, backbone)
    return _load_captions_file(source.path, split)


def _split_names(root: Path, split: str) -> list[str]:
    path = root / f"{split}.txt"
    if not path.is_file():
        have = sorted(p.stem for p in root.glob("*.txt"))
        raise DatasetError(f"{root} has no split {split!r} (it has: {', '.join(have) or 'none'})")
    return [s.strip() for s in path.read_text(encoding="utf-8").splitlines() if s.strip()]


def _load_features(root: Path, split: str | None, backbone: str) -> CaptionedImages:
    found = sorted((root / "features").glob("*.npy"))
    names = [p.stem for p in found]
    if backbone and backbone not in names:
        have = ", ".join(names) or "none"
        raise DatasetError(f"{root} has no features of {backbone} (it has: {have})")
    if not backbone:
        if len(names) != 1:
            raise DatasetError(f"{root}: name the backbone (features of {', '.join(names)})")
        backbone = names[0]
    everything = load_captioned_images(root, split=None, captions_file="captions.tsv", files=False)
    features = np.load(root / "features" / f"{backbone}.npy", mmap_mode="r")
    # row i of the features is the photo of line i of the captions file
    lines = (root / "captions.tsv").read_text(encoding="utf-8").splitlines()
    row_of = {line.partition("\t")[0].rpartition("#")[0]: i for i, line in enumerate(lines)}
    if len(features) != len(row_of) or len(row_of) != len(everything.images):
        raise DatasetError(
            f"{root}: {len(features)} feature rows for {len(row_of)} photos of captions.tsv"
        )
    position = {name: i for i, name in enumerate(everything.images)}
    wanted = everything.images if split is None else _split_names(root, split)
    if missing := [n for n in wanted if n not in position]:
        raise DatasetError(f"{root}: {len(missing)} photos of {split} have no caption")
    ds = everything.subset([position[n] for n in wanted])
    rows = np.asarray(features[np.asarray([row_of[n] for n in wanted])], dtype=np.float32)
    return replace(ds, features=rows, backbone=backbone)


def hash_split(name: str) -> str:
    """A photo's split in a captions-file collection, by a hash of its name."""
    bucket = int(hashlib.sha256(name.encode()).hexdigest(), 16) % 10
    return HASH_SPLITS.get(bucket, "train")


def _load_captions_file(path: Path, split: str | None) -> CaptionedImages:
    try:
        captions = read_caption_file(path).captions
    except CaptionFileError as exc:
        raise DatasetError(str(exc)) from None
    folder = path.parent
    names = [n for n in sorted(captions) if (folder / n).is_file()]
    if split is not None:
        names = [n for n in names if hash_split(n) == split]
    where = f"split {split!r} of {path}" if split else str(path)
    empty = f"no photo file with captions found in {where}"
    return collection(folder, [(n, captions[n]) for n in names], empty, image_dir=folder)
