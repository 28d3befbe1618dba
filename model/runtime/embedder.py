"""The runtime contract: ``Embedder`` (captions as trees and image features into one space
whose inner product is the score), and ``JointEmbedder`` for a ``JointModel`` with the
concept channel's columns appended."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from groundsearch.model.runtime.concepts import DIM as CONCEPT_DIM
from groundsearch.model.runtime.concepts import ConceptChannel, content_words
from groundsearch.model.runtime.joint import JointModel
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.shares import node_shares, supports_shares


class Embedder(Protocol):
    """A loaded model: captions and image features into one space (inner product: score)."""

    kind: str
    parser: str
    backbone: str

    @property
    def encoder(self) -> str: ...

    def embed_sentences(self, trees: Sequence[DependencyTree]) -> np.ndarray: ...

    def embed_images(self, features: np.ndarray) -> np.ndarray: ...

    def require_known_words(self, trees: Sequence[DependencyTree], what: str) -> None: ...

    def shares(self, tree: DependencyTree) -> list[float] | None: ...


class JointEmbedder:
    """A JointModel scored as trained: cosine when normalised, else the inner product."""

    kind = "joint"

    def __init__(
        self, model: JointModel, normalize: bool, concepts: ConceptChannel | None = None
    ) -> None:
        self.model, self.normalize = model, normalize
        self.parser, self.backbone = model.parser, model.backbone
        #: The open-vocabulary channel appended to both sides (None: off).
        self.concepts = concepts

    @property
    def encoder(self) -> str:
        return self.model.config.encoder

    def embed_sentences(self, trees: Sequence[DependencyTree]) -> np.ndarray:
        y = self.model.embed_sentences(list(trees), self.normalize)
        if self.concepts is None:
            return y
        g, novelty = self.concepts.sentence_parts(trees)
        # the channel speaks for what the joint model never trained (model.runtime.concepts)
        return np.hstack([(1.0 - novelty)[:, None] * y, self.concepts.scale * g])

    def embed_images(self, features: np.ndarray) -> np.ndarray:
        v = self.model.embed_images(features, self.normalize)
        if self.concepts is None:
            return v
        return np.hstack([v, self.concepts.scale * self.concepts.image_vectors(features)])

    @property
    def channel_columns(self) -> int:
        """How many trailing columns of each vector are the concept channel (0: none)."""
        return CONCEPT_DIM if self.concepts is not None else 0

    def require_known_words(self, trees: Sequence[DependencyTree], what: str = "caption") -> None:
        """NoKnownWordError for a text with no word the model (or its channel) knows."""
        if self.concepts is not None:
            channel = self.concepts
            trees = [t for t in trees if not any(channel.knows(w) for w in content_words(t))]
        self.model.require_known_words(trees, what)

    def shares(self, tree: DependencyTree) -> list[float] | None:
        """Each node's share of the sentence vector (Eq. 4 encoders; None for others)."""
        return node_shares(self.model, tree) if supports_shares(self.model) else None
