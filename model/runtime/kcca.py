"""The kCCA baseline as a retrieval model: sentences (mean GloVe vectors) and CNN features
through their fitted ``KernelProjection`` (fitting: ``model.training.kcca``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.text.vocab import Vocabulary


def sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T, 0)


@dataclass
class KernelProjection:
    """One view of a fitted kCCA: ``x ↦ exp(−γ‖x − l‖²)_l · P − offset`` over landmarks l."""

    landmarks: np.ndarray
    gamma: float
    P: np.ndarray
    offset: np.ndarray

    def __call__(self, x: np.ndarray, chunk: int = 4096) -> np.ndarray:
        x = np.asarray(x, np.float64)
        if x.ndim != 2 or x.shape[1] != (dim := self.landmarks.shape[1]):
            raise ValueError(f"kCCA input must be N × {dim}, got {tuple(x.shape)}")
        parts = [
            np.exp(-self.gamma * sq_dists(x[i : i + chunk], self.landmarks)) @ self.P
            for i in range(0, len(x), chunk)
        ]
        out = np.concatenate(parts) if parts else np.zeros((0, self.P.shape[1]))
        return out - self.offset

    def state(self) -> dict[str, object]:
        P, offset = torch.from_numpy(np.ascontiguousarray(self.P)), torch.from_numpy(self.offset)
        landmarks = torch.from_numpy(self.landmarks)
        return {"landmarks": landmarks, "gamma": float(self.gamma), "P": P, "offset": offset}

    @classmethod
    def from_state(cls, state: dict) -> KernelProjection:
        arrays = (state[k].numpy() for k in ("P", "offset"))
        return cls(state["landmarks"].numpy(), state["gamma"], *arrays)


def mean_word_vectors(trees: Sequence[DependencyTree], vocab: Vocabulary) -> np.ndarray:
    """Sentence features: the mean vector of the known words (else the unknown word's)."""
    out = np.empty((len(trees), vocab.dim))
    for i, tree in enumerate(trees):
        ids = [vocab.index(n.text) for n in tree if n.upos != "PUNCT"]
        ids = [k for k in ids if k] or [0]
        out[i] = vocab.vectors[ids].mean(axis=0)
    return out


def unit(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length."""
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


class KCCAModel:
    """A fitted kCCA with its vocabulary; unit-length embeddings (cosine)."""

    kind = encoder = "kcca"

    def __init__(
        self,
        sentences: KernelProjection,
        images: KernelProjection,
        vocab: Vocabulary,
        parser: str,
        backbone: str,
        config: dict[str, object],
    ) -> None:
        self.sentences, self.images, self.vocab = sentences, images, vocab
        self.parser, self.backbone, self.config = parser, backbone, config
        self.extra: dict[str, object] = {}

    def embed_sentences(self, trees: Sequence[DependencyTree]) -> np.ndarray:
        return unit(self.sentences(mean_word_vectors(trees, self.vocab)))

    def embed_images(self, features: np.ndarray) -> np.ndarray:
        return unit(self.images(features))

    def require_known_words(self, trees: Sequence[DependencyTree], what: str = "caption") -> None:
        """NoKnownWordError for a sentence with no word in the vocabulary."""
        self.vocab.require_known([t.words for t in trees], what)

    def shares(self, tree: DependencyTree) -> list[float] | None:
        """kCCA has no per-word decomposition of its sentence vector."""
        return None
