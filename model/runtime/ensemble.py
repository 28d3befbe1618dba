"""An ensemble of different encoders: each member's embeddings scaled by √(w_i / Σw) and
concatenated, so ``v · y`` is the weighted mean of their scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from groundsearch.model.runtime.checkpoints import CheckpointError
from groundsearch.model.runtime.embedder import JointEmbedder
from groundsearch.model.runtime.parsing.tree import DependencyTree


class EnsembleEmbedder:
    """Members that read the same parses and image features, scored together."""

    kind = "ensemble"

    def __init__(self, members: Sequence[JointEmbedder], weights: Sequence[float] | None = None):
        if len(members) < 2:
            raise CheckpointError("an ensemble needs at least two checkpoints")
        weights = list(weights) if weights is not None else [1.0] * len(members)
        if len(weights) != len(members) or min(weights) <= 0:
            raise CheckpointError(f"need one positive weight per member, got {weights}")
        for m in members[1:]:
            for attr in ("parser", "backbone"):
                if (theirs := getattr(m, attr)) != (first := getattr(members[0], attr)):
                    raise CheckpointError(
                        f"ensemble members disagree on the {attr}: {first} and {theirs}"
                    )
        self.members = list(members)
        total = float(sum(weights))
        self.scales = [float(np.sqrt(w / total)) for w in weights]
        self.parser, self.backbone = members[0].parser, members[0].backbone

    @property
    def encoder(self) -> str:
        return "+".join(m.encoder for m in self.members)

    def embed_sentences(self, trees: Sequence[DependencyTree]) -> np.ndarray:
        return np.hstack([s * m.embed_sentences(trees) for s, m in self._scaled()])

    def embed_images(self, features: np.ndarray) -> np.ndarray:
        return np.hstack([s * m.embed_images(features) for s, m in self._scaled()])

    def _scaled(self) -> zip[tuple[float, JointEmbedder]]:
        return zip(self.scales, self.members, strict=True)

    def require_known_words(self, trees: Sequence[DependencyTree], what: str = "caption") -> None:
        for m in self.members:
            m.require_known_words(trees, what)
