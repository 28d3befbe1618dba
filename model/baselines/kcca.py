"""Kernel CCA between sentence and image features (the paper's kCCA baseline).

Both views go through an RBF kernel approximated with Nyström landmarks (an exact
kernel over 30k captions would not fit in memory), then regularised linear CCA finds
directions in which the two views are maximally correlated. Sentences are the mean of
their GloVe word vectors, as in the paper's bag-of-words input.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _inv_sqrt(c: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eigh(c)
    return (v / np.sqrt(np.maximum(w, 1e-12))) @ v.T


@dataclass
class Nystrom:
    """RBF kernel features from ``landmarks`` (γ set from the median distance)."""

    landmarks: np.ndarray
    gamma: float
    whiten: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray, n_landmarks: int, rng: np.random.Generator) -> Nystrom:
        idx = rng.choice(len(x), size=min(n_landmarks, len(x)), replace=False)
        land = x[idx]
        d2 = _sq_dists(land, land)
        gamma = 1.0 / max(np.median(d2[d2 > 0]), 1e-12)
        k = np.exp(-gamma * d2)
        return cls(land, gamma, _inv_sqrt(k + 1e-6 * np.eye(len(k))))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.exp(-self.gamma * _sq_dists(x, self.landmarks)) @ self.whiten


def _sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum((a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T, 0)


@dataclass
class KCCA:
    """Fitted kernel CCA: ``project_sentences`` and ``project_images`` into ``dim`` dims."""

    sent_map: Nystrom
    img_map: Nystrom
    sent_mean: np.ndarray
    img_mean: np.ndarray
    A: np.ndarray
    B: np.ndarray
    correlations: np.ndarray

    @classmethod
    def fit(
        cls,
        sentences: np.ndarray,
        images: np.ndarray,
        dim: int = 50,
        n_landmarks: int = 1000,
        reg: float = 1e-2,
        seed: int = 0,
    ) -> KCCA:
        """``sentences[k]`` and ``images[k]`` are a matching pair (rows of equal count)."""
        if len(sentences) != len(images) or len(sentences) < 2:
            raise ValueError("kCCA needs 2+ matching (sentence, image) rows")
        rng = np.random.default_rng(seed)
        sent_map = Nystrom.fit(np.asarray(sentences, np.float64), n_landmarks, rng)
        img_map = Nystrom.fit(np.asarray(images, np.float64), n_landmarks, rng)
        fs, fi = sent_map(sentences), img_map(images)
        ms, mi = fs.mean(0), fi.mean(0)
        fs, fi = fs - ms, fi - mi
        n = len(fs)
        css = fs.T @ fs / n
        cii = fi.T @ fi / n
        csi = fs.T @ fi / n
        ws = _inv_sqrt(css + reg * np.trace(css) / len(css) * np.eye(len(css)))
        wi = _inv_sqrt(cii + reg * np.trace(cii) / len(cii) * np.eye(len(cii)))
        u, s, vt = np.linalg.svd(ws @ csi @ wi)
        k = min(dim, len(s))
        return cls(sent_map, img_map, ms, mi, ws @ u[:, :k], wi @ vt[:k].T, s[:k])

    def project_sentences(self, sentences: np.ndarray) -> np.ndarray:
        return ((self.sent_map(sentences) - self.sent_mean) @ self.A) * np.sqrt(self.correlations)

    def project_images(self, images: np.ndarray) -> np.ndarray:
        return ((self.img_map(images) - self.img_mean) @ self.B) * np.sqrt(self.correlations)
