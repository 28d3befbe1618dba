"""From a Flickr8k-layout folder to training-ready splits: parse once, embed once.

    >>> split = build_split(load_captioned_images(root, split="train"), parser, extractor)

Captions go through the text front door (``model.runtime.sentences``) over the parser's
disk cache, and photos through the feature cache, so the second call costs only the
look-ups.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from groundsearch.model.data import CaptionedImages
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
    """Every text's tree; UnusableText naming the first one refused by its number and
    text (``caption 3 ('…') has no word the model knows: …``)."""
    whats = [f"{w} ({t[:80]!r})" for w, t in zip(labels(len(texts), noun), texts, strict=True)]
    return door.trees(texts, whats)


def text_trees(parser: Parser) -> TreesFn:
    """Texts → trees through a model-less ``corpus_door``, for protocols that embed
    sentences whatever their words (sentence benchmarks, expert judgments, concept
    queries); UnusableText names a text that cannot be parsed (``text 3 ('…'): …``)."""
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
    features = extractor.embed_files(
        [ds.image_path(i) for i in range(len(ds.images))], progress=progress
    )
    return Split(trees, features, np.asarray(ds.caption_image))
