"""From a Flickr8k-layout folder to training-ready splits: parse once, embed once.

Captions go through the text front door over the parser's cache and photos through the
feature cache, so a second call costs only the look-ups.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from groundsearch.model.data import CaptionedImages, DatasetError
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.sentences import SentenceModel, Sentences, labels
from groundsearch.model.training.loop import Split

#: Texts → their trees, in order (``text_trees``).
TreesFn = Callable[[Sequence[str]], list[DependencyTree]]


def corpus_door(parser: Parser, model: SentenceModel | None = None) -> Sentences:
    """The text front door over ``parser`` for many texts: its parse cache, and as many
    processes as CPUs for what the cache lacks. With ``model``, its known-word rule too."""
    return Sentences(model, partial(parser.parse, workers=os.cpu_count() or 1))


def named_trees(
    door: Sentences, texts: Sequence[str], noun: str = "caption"
) -> list[DependencyTree]:
    """Every text's tree; UnusableText naming the first refused by number and text."""
    whats = [f"{w} ({t[:80]!r})" for w, t in zip(labels(len(texts), noun), texts, strict=True)]
    return door.trees(texts, whats)


def text_trees(parser: Parser) -> TreesFn:
    """Texts → trees through a model-less ``corpus_door``."""
    door = corpus_door(parser)
    return lambda texts: named_trees(door, texts, "text")


def build_split(
    ds: CaptionedImages,
    parser: Parser,
    extractor: FeatureExtractor,
    progress: bool = False,
    model: SentenceModel | None = None,
) -> Split:
    """Parse the captions and embed the photos of one dataset split; with ``model``,
    each caption must hold a word it knows (UnusableText names the first that does not)."""
    trees = named_trees(corpus_door(parser, model), ds.captions)
    return Split(trees, photo_features(ds, extractor, progress), np.asarray(ds.caption_image))


def photo_features(
    ds: CaptionedImages, extractor: FeatureExtractor, progress: bool = False
) -> np.ndarray:
    """The pooled features of ``ds``'s photos: its own rows (DatasetError for another
    backbone's), else the files' through the extractor's cache."""
    if ds.features is None:
        return extractor.embed_files(ds.image_paths(), progress=progress)
    if ds.backbone != extractor.identity:
        raise DatasetError(
            f"{ds.root} gives {ds.backbone} features; this model reads {extractor.identity}'s"
        )
    return np.asarray(ds.features, dtype=np.float32)


def joined(splits: Sequence[Split], weights: Sequence[float] = ()) -> Split:
    """Several collections' splits as one, each caption drawn by its collection's weight."""
    if len(splits) == 1 and not weights:
        return splits[0]
    weights = list(weights) or [1.0] * len(splits)
    offsets = np.cumsum([0] + [len(s.features) for s in splits[:-1]])
    return Split(
        [t for s in splits for t in s.trees],
        np.concatenate([s.features for s in splits]),
        np.concatenate([s.caption_image + o for s, o in zip(splits, offsets, strict=True)]),
        rate=np.concatenate(
            [np.full(len(s.trees), w, np.float64) for s, w in zip(splits, weights, strict=True)]
        ),
    )
