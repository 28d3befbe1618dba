"""Read any dataset laid out like Flickr8k: ``<image>#<n><TAB><caption>`` lines, a folder
of images and optional split lists (captions whose image file is missing are skipped).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

#: Flickr8k's own file names, used when the caller names a split instead of a file.
FLICKR8K_SPLITS = {split: f"Flickr_8k.{split}Images.txt" for split in ("train", "dev", "test")}
CAPTIONS_FILE = "Flickr8k.token.txt"
IMAGES_DIR = "Images"
#: Flickr8k's expert judgments of image–caption pairs (optional).
EXPERT_FILE = "ExpertAnnotations.txt"


class DatasetError(ValueError):
    """A dataset that cannot be read, with the reason and the path."""


@dataclass(frozen=True)
class CaptionedImages:
    """Images and their captions, in a fixed order (``caption_image[j]``: caption ``j``'s
    image); photos are files under ``image_dir`` or rows of ``features``."""

    root: Path
    images: tuple[str, ...]
    captions: tuple[str, ...]
    caption_image: tuple[int, ...]
    image_dir: Path | None = None
    features: np.ndarray | None = None
    backbone: str = ""

    def image_path(self, i: int) -> Path:
        if self.features is not None:
            raise DatasetError(f"{self.root} gives its photos as features, not files")
        return (self.image_dir or self.root / IMAGES_DIR) / self.images[i]

    def image_paths(self) -> list[Path]:
        """Every photo's file, in order (DatasetError for a features-only collection)."""
        return [self.image_path(i) for i in range(len(self.images))]

    def subset(self, keep: list[int]) -> CaptionedImages:
        """The photos at positions ``keep`` (in that order) with their captions."""
        new_index = {old: new for new, old in enumerate(keep)}
        linked = zip(self.captions, self.caption_image, strict=True)
        kept = ((text, new_index[image]) for text, image in linked if image in new_index)
        pairs = sorted(kept, key=lambda pair: pair[1])
        return replace(
            self,
            images=tuple(self.images[i] for i in keep),
            captions=tuple(t for t, _ in pairs),
            caption_image=tuple(i for _, i in pairs),
            features=None if self.features is None else self.features[keep],
        )

    def captions_of(self, i: int) -> list[str]:
        return [c for c, k in zip(self.captions, self.caption_image, strict=True) if k == i]


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DatasetError(f"file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path} is not UTF-8 text ({exc.reason})") from None


def _read_captions(path: Path) -> list[tuple[str, int, str]]:
    """(image name, caption number, caption) of each ``<image>#<n><TAB><caption>`` line."""
    out = []
    for n, line in enumerate(_read_lines(path), start=1):
        if not line.strip():
            continue
        key, sep, text = line.partition("\t")
        name, hash_, number = key.rpartition("#")
        if not sep or not hash_ or not number.isdigit():
            raise DatasetError(
                f"{path}:{n}: expected '<image>#<n><TAB><caption>', got {line[:80]!r}"
            )
        out.append((name, int(number), text.strip()))
    return out


def read_caption_ids(root: Path, captions_file: str = CAPTIONS_FILE) -> dict[str, str]:
    """Every caption of ``root``'s captions file by its id, its image file there or not."""
    lines = _read_captions(Path(root) / captions_file)
    return {f"{name}#{number}": text for name, number, text in lines}


def load_captioned_images(
    root: Path,
    split: str | Path | None = None,
    captions_file: str = CAPTIONS_FILE,
    files: bool = True,
) -> CaptionedImages:
    """Load ``root`` (a Flickr8k-layout folder), restricted to ``split`` (a name or a list
    file); DatasetError for a missing or malformed file or no image."""
    root = Path(root)
    if files and not (root / IMAGES_DIR).is_dir():
        raise DatasetError(f"image folder not found: {root / IMAGES_DIR}")
    by_image: dict[str, list[tuple[int, str]]] = {}
    for name, number, text in _read_captions(root / captions_file):
        by_image.setdefault(name, []).append((number, text))

    if split is None:
        wanted = sorted(by_image)
    else:
        split_path = root / FLICKR8K_SPLITS[split] if split in FLICKR8K_SPLITS else Path(split)
        wanted = [s.strip() for s in _read_lines(split_path) if s.strip()]
    chosen = [
        (name, [text for _, text in sorted(by_image[name])])
        for name in wanted
        if name in by_image and not (files and not (root / IMAGES_DIR / name).is_file())
    ]
    where = f"split {split!r} of {root}" if split is not None else str(root)
    return collection(root, chosen, f"no image with captions found in {where}")


def collection(
    root: Path, photos: Sequence[tuple[str, Sequence[str]]], empty: str, **more: Any
) -> CaptionedImages:
    """The ``photos`` (name, its captions), in order, as a collection (``more``: its other
    fields); DatasetError ``empty`` when there is none."""
    if not photos:
        raise DatasetError(empty)
    pairs = [(text, i) for i, (_, texts) in enumerate(photos) for text in texts]
    images, captions = tuple(name for name, _ in photos), tuple(t for t, _ in pairs)
    return CaptionedImages(root, images, captions, tuple(i for _, i in pairs), **more)
