"""Open any groundsearch checkpoint as an ``Embedder``: a JointModel or a kCCA baseline.

>>> model = load_checkpoint(Path("runs/kcca.pt"), parser=Parser().version)
>>> model.kind, model.parser == Parser().version
('kcca', True)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from model.baselines.kcca import KCCAModel, read_kcca_state
from model.joint import JointModel
from model.parsing.tree import DependencyTree


class JointEmbedder:
    """A JointModel scored as it was trained: cosine when trained with normalised
    vectors, the inner product otherwise (snapshot ensembles included)."""

    kind = "joint"

    def __init__(self, model: JointModel, normalize: bool) -> None:
        self.model, self.normalize = model, normalize
        self.parser, self.backbone = model.parser, model.backbone

    @property
    def encoder(self) -> str:
        return self.model.config.encoder

    def embed_sentences(self, trees: Sequence[DependencyTree]) -> np.ndarray:
        return self.model.embed_sentences(list(trees), self.normalize)

    def embed_images(self, features: np.ndarray) -> np.ndarray:
        return self.model.embed_images(features, self.normalize)

    def require_known_words(self, trees: Sequence[DependencyTree], what: str) -> None:
        self.model.require_known_words(trees, what)


def load_checkpoint(
    path: Path, parser: str | None = None, backbone: str | None = None
) -> JointEmbedder | KCCAModel:
    """The model saved at ``path``, refused (CheckpointError) if it was made with another
    parser or backbone than those given."""
    state = read_kcca_state(path)
    if state is not None:
        return KCCAModel.from_state(state, path, parser, backbone)
    model = JointModel.load(path, parser=parser, backbone=backbone)
    normalize = bool(getattr(model, "extra", {}).get("train", {}).get("normalize", False))
    return JointEmbedder(model, normalize)
