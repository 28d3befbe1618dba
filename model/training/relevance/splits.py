"""A split embedded once (``SplitData``), its queries ranked as the service ranks them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from groundsearch.model.data.flickr import CaptionedImages
from groundsearch.model.runtime.evidence import (
    NounClasses,
    evidence_channels,
    evidence_nouns,
    joined,
    noun_words,
    top_of,
)
from groundsearch.model.runtime.fusion import Fusion, content_words
from groundsearch.model.runtime.objects.nouns import NounObjects
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.relevance import TOP, novelty_of
from groundsearch.model.runtime.tagger import WordTagger, row_products

ParseFn = Callable[[list[str]], list[DependencyTree]]
EmbedFn = Callable[[Sequence[DependencyTree]], np.ndarray]


@dataclass
class SplitData:
    """A split embedded once: caption trees, photo and caption vectors; for evidence,
    each photo's top classes (ids, probabilities), the noun → classes table and tagger."""

    ds: CaptionedImages
    trees: list[DependencyTree]
    photos: np.ndarray
    captions: np.ndarray
    channel_columns: int
    classes: tuple[np.ndarray, np.ndarray] | None = None
    nouns: NounClasses | None = None
    tagger: WordTagger | None = None
    #: each photo's and caption's hubness penalty (``model.runtime.hubness``), as the
    #: service ranks them
    photo_penalty: np.ndarray | None = None
    caption_penalty: np.ndarray | None = None
    #: short queries' scores fused with their evidence (``model.runtime.fusion``), as
    #: the service ranks them
    fusion: Fusion | None = None
    #: each photo's object detector scores (photos × 80; ``model.runtime.objects``) and
    #: the noun → kinds table that reads them, for the fusion's third channel
    objects: np.ndarray | None = None
    kinds: NounObjects | None = None

    @property
    def caption_image(self) -> np.ndarray:
        return np.asarray(self.ds.caption_image)

    def text_scores(self, vectors: np.ndarray) -> np.ndarray:
        """Text queries' scores of every photo (queries × photos), as ``/search`` ranks
        them: less each photo's penalty when the split has them."""
        scores = np.asarray(vectors) @ self.photos.T
        return scores if self.photo_penalty is None else scores - self.photo_penalty[None, :]

    def ranked(
        self, row: np.ndarray, tree: DependencyTree, top: int = TOP
    ) -> tuple[np.ndarray, np.ndarray]:
        """A text query's ``top`` photos as ``/search`` ranks them (``fused``) and their
        scores as its relevance reads them (``row``'s: the joint scores)."""
        idx, _ = top_of(self.fused(row, tree)[None, :], top)
        return idx[0], row[idx[0]]

    def fused(self, row: np.ndarray, tree: DependencyTree) -> np.ndarray:
        """A text query's scores of every photo (-inf: left out) as ``/search`` ranks
        them: fused with the photos' evidence when ``fusion`` applies to it."""
        if self.fusion is None:
            return row
        nouns, words = self.query_nouns(tree), content_words(tree)
        named = self.kinds.named(noun_words(tree)) if self.kinds is not None else []
        if not self.fusion.applies(words, len(nouns) + len(named)):
            return row
        objects = None
        if self.objects is not None and self.kinds is not None:
            objects = self.kinds.evidence(named, self.objects)
        return self.fusion.fuse(row, *self.channels(nouns, np.arange(len(row))), words, objects)

    def caption_scores(self) -> np.ndarray:
        """Every photo's scores of the split's captions (photos × captions), as
        ``/describe`` ranks them: less each caption's penalty when the split has them."""
        scores = self.photos @ self.captions.T
        return scores if self.caption_penalty is None else scores - self.caption_penalty[None, :]

    def novelty(self, vectors: np.ndarray) -> np.ndarray:
        return np.array([novelty_of(v, self.channel_columns) for v in vectors])

    def query_nouns(self, tree: DependencyTree) -> list[str]:
        """A text query's nouns with evidence (``evidence_nouns``; [] without)."""
        table = self.nouns if self.classes is not None else None
        return evidence_nouns(noun_words(tree), table, self.tagger)

    def evidence(self, nouns: Sequence[str], photos: np.ndarray) -> np.ndarray | None:
        """Each of ``photos``' evidence for ``nouns`` (None without: the larger of ``channels``)."""
        return joined(*self.channels(nouns, photos))

    def channels(
        self, nouns: Sequence[str], photos: np.ndarray
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Each of ``photos``' evidence for ``nouns`` from the classifier and the tagger."""
        idx = np.asarray(photos, np.int64)
        classes = None if self.classes is None else (self.classes[0][idx], self.classes[1][idx])
        vectors = self.photos[idx]
        return evidence_channels(
            nouns, self.nouns, classes, self.tagger, lambda w: row_products(vectors, w)
        )
