"""Kernel CCA between sentence and image features (the paper's kCCA baseline).

Both views go through an RBF kernel approximated with Nyström landmarks, then
regularised linear CCA; sentences are the mean of their GloVe word vectors. ``fit_kcca``
picks its size and regularisation on dev and returns a ``KCCAModel``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from groundsearch.model.runtime.kcca import (
    KCCAModel,
    KernelProjection,
    mean_word_vectors,
    sq_dists,
    unit,
)
from groundsearch.model.runtime.text.vocab import Vocabulary
from groundsearch.model.training.evaluation.retrieval import retrieval_metrics
from groundsearch.model.training.loop import DevSet, Split, option


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
        """Landmarks drawn from the distinct rows of ``x``."""
        x = _distinct_rows(x)
        idx = rng.choice(len(x), size=min(n_landmarks, len(x)), replace=False)
        land = x[idx]
        d2 = sq_dists(land, land)
        gamma = 1.0 / max(np.median(d2[d2 > 0]), 1e-12)
        k = np.exp(-gamma * d2)
        return cls(land, gamma, _inv_sqrt(k + 1e-6 * np.eye(len(k))))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.exp(-self.gamma * sq_dists(x, self.landmarks)) @ self.whiten


def _distinct_rows(x: np.ndarray) -> np.ndarray:
    """The rows of ``x`` without repeats, in their first order."""
    x = np.ascontiguousarray(x)
    keys = x.view(np.dtype((np.void, x.dtype.itemsize * x.shape[1]))).ravel()
    _, first = np.unique(keys, return_index=True)
    return x if len(first) == len(x) else x[np.sort(first)]


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
    def fit_grid(
        cls,
        sentences: np.ndarray,
        images: np.ndarray,
        regs: Sequence[float],
        dim: int = 50,
        n_landmarks: int = 1000,
        seed: int = 0,
    ) -> list[KCCA]:
        """One model per regularisation in ``regs``, sharing the Nyström maps and the
        covariances (the costly part); ``truncated`` gives the smaller dimensions."""
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
        models = []
        for reg in regs:
            ws = _inv_sqrt(css + reg * np.trace(css) / len(css) * np.eye(len(css)))
            wi = _inv_sqrt(cii + reg * np.trace(cii) / len(cii) * np.eye(len(cii)))
            u, s, vt = np.linalg.svd(ws @ csi @ wi)
            k = min(dim, len(s))
            models.append(cls(sent_map, img_map, ms, mi, ws @ u[:, :k], wi @ vt[:k].T, s[:k]))
        return models

    @property
    def dim(self) -> int:
        return len(self.correlations)

    def truncated(self, dim: int) -> KCCA:
        """The same model keeping its ``dim`` most correlated directions."""
        return replace(
            self, A=self.A[:, :dim], B=self.B[:, :dim], correlations=self.correlations[:dim]
        )

    def folded(self) -> tuple[KernelProjection, KernelProjection]:
        """The sentence and image projections, each folded into one kernel map."""
        scale = np.sqrt(self.correlations)

        def fold(m: Nystrom, mean: np.ndarray, w: np.ndarray) -> KernelProjection:
            return KernelProjection(m.landmarks, m.gamma, m.whiten @ w * scale, mean @ w * scale)

        return fold(self.sent_map, self.sent_mean, self.A), fold(
            self.img_map, self.img_mean, self.B
        )

    def project_sentences(self, sentences: np.ndarray) -> np.ndarray:
        return ((self.sent_map(sentences) - self.sent_mean) @ self.A) * np.sqrt(self.correlations)

    def project_images(self, images: np.ndarray) -> np.ndarray:
        return ((self.img_map(images) - self.img_mean) @ self.B) * np.sqrt(self.correlations)


@dataclass
class KCCAConfig:
    """Fitting options: Nyström landmarks per view and the grid selected on dev rsum."""

    n_landmarks: int = option(2000, "Nyström landmarks per view", flag="--landmarks")
    dims: tuple[int, ...] = (50, 100, 200, 400)
    regs: tuple[float, ...] = (0.01, 0.1, 1.0)
    seed: int = 0

    def __post_init__(self) -> None:
        self.dims, self.regs = tuple(self.dims), tuple(self.regs)
        if self.n_landmarks < 2 or not self.dims or min(self.dims) < 1:
            raise ValueError("kCCA needs ≥ 2 landmarks and dimensions ≥ 1")
        if not self.regs or min(self.regs) <= 0:
            raise ValueError("kCCA regularisations must be > 0")


def fit_kcca(
    train: Split,
    dev: DevSet,
    vocab: Vocabulary,
    parser: str,
    backbone: str,
    cfg: KCCAConfig,
    progress: Callable[[str], None] | None = None,
) -> tuple[KCCAModel, dict[str, object], list[dict[str, float]]]:
    """Fit on ``train`` pairs for each regularisation and keep the (reg, dim) with the best
    dev rsum; the model, its dev metrics and the grid of dev rsums."""
    sentences = mean_word_vectors(train.trees, vocab)
    images = np.asarray(train.features, np.float64)[np.asarray(train.caption_image)]
    fits = KCCA.fit_grid(sentences, images, cfg.regs, max(cfg.dims), cfg.n_landmarks, cfg.seed)
    devs = dev if isinstance(dev, Mapping) else {"dev": dev}
    dev_sentences = {k: mean_word_vectors(d.trees, vocab) for k, d in devs.items()}
    grid: list[dict[str, float]] = []
    best: tuple[float, KCCA, dict[str, object]] | None = None
    for reg, fit in zip(cfg.regs, fits, strict=True):
        for dim in sorted({min(d, fit.dim) for d in cfg.dims}):
            m = fit.truncated(dim)
            rsums = []
            for k, d in devs.items():
                y = unit(m.project_sentences(dev_sentences[k]))
                v = unit(m.project_images(d.features))
                rsums.append(float(retrieval_metrics(v @ y.T, d.caption_image)["rsum"]))
            rsum = float(np.mean(rsums))
            grid.append({"reg": reg, "dim": dim, "dev_rsum": rsum})
            if progress:
                progress(f"kcca reg {reg:g} dim {dim}: dev rsum {rsum:.1f}")
            if best is None or rsum > best[0]:
                best = (rsum, m, {"reg": reg, "dim": dim})
    assert best is not None
    _, chosen, picked = best
    config = {"n_landmarks": cfg.n_landmarks, "seed": cfg.seed, **picked}
    model = KCCAModel(*chosen.folded(), vocab, parser, backbone, config)
    sources = {
        k: retrieval_metrics(
            model.embed_images(d.features) @ model.embed_sentences(d.trees).T, d.caption_image
        )
        for k, d in devs.items()
    }
    if not isinstance(dev, Mapping):
        return model, sources["dev"], grid
    mean = round(float(np.mean([m["rsum"] for m in sources.values()])), 2)
    return model, {"rsum": mean, "sources": sources}, grid
