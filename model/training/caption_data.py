"""A caption decoder's data: collections' photos and captions as a joint model's vectors,
with each photo's reference captions.

``CaptionData`` reads each collection's split once per process, so the commands that
``groundsearch teach`` runs in one process share them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from groundsearch.model.data import CaptionedImages
from groundsearch.model.data.held_out_concepts import resolve, without_concepts
from groundsearch.model.data.sources import Source, load_source
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.sentences import Sentences
from groundsearch.model.training.captioning import CaptionSet
from groundsearch.model.training.corpus import photo_features, text_trees

#: A collection's photos (one split) → their caption set, photos named ``prefix/photo``.
VectorsOf = Callable[[CaptionedImages, str], CaptionSet]


@dataclass(frozen=True)
class SplitVectors:
    """One split of several collections, joined in order: the vectors, each photo's
    reference captions and each collection's count of photos."""

    vectors: CaptionSet
    references: list[list[str]]
    sizes: list[int]

    def groups(self) -> list[tuple[np.ndarray, list[list[str]]]]:
        """Each collection's photo vectors and references (a judge scores each apart)."""
        cuts = np.cumsum([0, *self.sizes])
        v, refs = self.vectors.photo_vectors, self.references
        return [(v[a:b], refs[a:b]) for a, b in pairwise(cuts)]


def share_of(ds: CaptionedImages, weight: float, seed: int = 0) -> CaptionedImages:
    """``ds`` with a ``weight`` share of its photos (all of them from 1), drawn by ``seed``."""
    if weight >= 1:
        return ds
    n = len(ds.images)
    keep = np.random.default_rng(seed).permutation(n)[: max(1, round(weight * n))]
    return ds.subset(sorted(int(i) for i in keep))


def references_of(ds: CaptionedImages) -> list[list[str]]:
    """Each photo's captions, in photo order."""
    refs: dict[int, list[str]] = {}
    for text, i in zip(ds.captions, ds.caption_image, strict=True):
        refs.setdefault(i, []).append(text)
    return [refs[i] for i in range(len(ds.images))]


def caption_queries(test: CaptionSet) -> tuple[np.ndarray, list[list[str]]]:
    """Each photo's first caption's vector, and its other captions as the references: a
    free sentence decoded into a paraphrase."""
    first = [
        int(np.flatnonzero(test.caption_photo == i)[0]) for i in range(len(test.photo_vectors))
    ]
    refs = [
        [t for j, t in enumerate(test.caption_texts) if test.caption_photo[j] == i and j != f]
        for i, f in enumerate(first)
    ]
    return test.caption_vectors[first], refs


class CaptionData:
    """Collections' splits in ``model``'s space (photos through its backbone's features
    in ``cache_dir``, captions through ``parser``); each split read once."""

    def __init__(self, model: Any, parser: Parser, cache_dir: Path | None) -> None:
        self.model = model
        self.extractor = FeatureExtractor(model.backbone, cache_dir=cache_dir)
        self._trees = text_trees(parser)
        self._door = Sentences(None, parser.parse)
        self._read: dict[tuple[str, str | None], CaptionedImages] = {}
        self._sets: dict[tuple[str, str | None, str, tuple[str, ...]], CaptionSet] = {}

    def collection(self, source: Source, split: str | None) -> CaptionedImages:
        """One split of ``source`` (None: all of it)."""
        key = (str(source.path), split)
        if key not in self._read:
            self._read[key] = load_source(source, split, self.model.backbone)
        return self._read[key]

    def features(self, ds: CaptionedImages) -> np.ndarray:
        """The backbone's pooled features of ``ds``'s photos (its rows, or the cache's)."""
        return photo_features(ds, self.extractor)

    def trees(self, ds: CaptionedImages) -> list[DependencyTree]:
        """The parses of ``ds``'s captions (the parser's cache)."""
        return self._trees(list(ds.captions))

    def vectors(self, ds: CaptionedImages, prefix: str = "") -> CaptionSet:
        """``ds``'s photo and caption vectors, photos named ``prefix/photo``."""
        captions = self.model.embed_sentences(self.trees(ds))
        return CaptionSet(
            np.asarray(self.model.embed_images(self.features(ds)), np.float32),
            tuple(ds.captions),
            np.asarray(ds.caption_image, dtype=np.int64),
            np.asarray(captions, np.float32),
            tuple(f"{prefix}/{p}" if prefix else p for p in ds.images),
        )

    def split(
        self,
        sources: Sequence[Source],
        split: str | None,
        hold_out: Sequence[str] | None = None,
        shares: bool = False,
        vectors_of: VectorsOf | None = None,
    ) -> SplitVectors:
        """``split`` of every source, joined: less ``hold_out``'s photos, with ``shares``
        each source's weight as the share of its photos kept (``share_of``); vectors by
        ``vectors_of`` (default: ``vectors``, each read once)."""
        parts, references = [], []
        concepts = resolve(hold_out) if hold_out else None
        for source in sources:
            ds = self.collection(source, split)
            if concepts:
                ds = without_concepts(ds, concepts)
            if shares:
                ds = share_of(ds, source.weight)
            prefix = source.name if len(sources) > 1 else ""
            if vectors_of is not None:
                parts.append(vectors_of(ds, prefix))
            else:
                key = (str(source.path), split, prefix, ds.images)  # a share reads apart
                if key not in self._sets:
                    self._sets[key] = self.vectors(ds, prefix)
                parts.append(self._sets[key])
            references += references_of(ds)
        return SplitVectors(
            CaptionSet.joined(parts), references, [len(p.photo_vectors) for p in parts]
        )

    def texts(self, sources: Sequence[Source], split: str | None) -> tuple[str, ...]:
        """Every caption of ``split`` of the sources (no vectors: a copy share's reference)."""
        return tuple(c for source in sources for c in self.collection(source, split).captions)

    def embed_texts(self, texts: list[str]) -> Any:
        """Written sentences → the model's sentence vectors, through the text front door
        (each sentence scored whatever its words, as the service scores what it writes)."""
        return self.model.embed_sentences(self._door.trees(texts))
