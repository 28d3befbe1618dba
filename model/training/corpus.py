"""From a Flickr8k-layout folder to training-ready splits: parse once, embed once.

    >>> splits = load_splits(data_dir / "flickr8k", ["train", "dev"], parser, extractor)

Captions go through the parser's disk cache and photos through the feature cache, so
the second call costs only the look-ups.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from groundsearch.model.data import CaptionedImages, load_captioned_images
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.training.loop import Split


def build_split(
    ds: CaptionedImages, parser: Parser, extractor: FeatureExtractor, progress: bool = False
) -> Split:
    """Parse the captions and embed the photos of one dataset split."""
    trees = parser.parse(list(ds.captions), workers=os.cpu_count() or 1)
    features = extractor.embed_files(
        [ds.image_path(i) for i in range(len(ds.images))], progress=progress
    )
    return Split(trees, features, np.asarray(ds.caption_image))


def load_splits(
    root: Path,
    names: Sequence[str | None],
    parser: Parser,
    extractor: FeatureExtractor,
    progress: bool = False,
) -> dict[str, Split]:
    """``build_split`` for each named split (``None`` = the whole dataset)."""
    return {
        str(name): build_split(load_captioned_images(root, split=name), parser, extractor, progress)
        for name in names
    }
