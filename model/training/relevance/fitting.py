"""Each kind's logistic + isotonic model fitted on the pooled hits (5 folds grouped by
query), with and without evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from groundsearch.model.runtime.relevance import FEATURES, SMALL_FEATURES, KindModel
from groundsearch.model.training.relevance.pools import Pool

#: The features each kind's model reads.
KIND_FEATURES: dict[str, tuple[str, ...]] = {
    # novelty is left out: no dev query has ρ near 1, so its weight would extrapolate
    "text-image": ("score", "mean", "lead", "log_words"),
    "image-caption": ("score", "mean", "lead"),
    "image-image": ("score", "mean", "lead"),
    "arithmetic": ("score", "mean", "lead"),
}


def fit_kind(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    names: Sequence[str],
    weights: np.ndarray | None = None,
) -> KindModel:
    """A logistic regression on standardised ``names`` columns, then an isotonic map."""
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    cols = [FEATURES.index(n) for n in names]
    z = x[:, cols]
    mean, scale = z.mean(axis=0), z.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    z = (z - mean) / scale
    w = np.ones(len(y)) if weights is None else weights

    def logistic(rows: np.ndarray | slice) -> LogisticRegression:
        return LogisticRegression(C=1.0, max_iter=1000).fit(z[rows], y[rows], sample_weight=w[rows])

    oof = np.zeros(len(y))
    splitter = GroupKFold(n_splits=5, shuffle=True, random_state=0)
    for tr, te in splitter.split(z, y, groups):
        oof[te] = logistic(tr).predict_proba(z[te])[:, 1]
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(oof, y, sample_weight=w)
    final = logistic(slice(None))
    return KindModel(
        features=tuple(names),
        mean=mean,
        scale=scale,
        coef=final.coef_[0].astype(np.float64),
        intercept=float(final.intercept_[0]),
        iso_x=np.asarray(iso.X_thresholds_, np.float64),
        iso_y=np.asarray(iso.y_thresholds_, np.float64),
    )


def source_weights(sources: np.ndarray, share: Mapping[str, float]) -> np.ndarray:
    """Weights giving each named source ``share`` of the total (the rest share the rest)."""
    w = np.ones(len(sources))
    named = {s: f for s, f in share.items() if np.any(sources == s)}
    rest = ~np.isin(sources, list(named))
    total = float(len(sources))
    for s, f in named.items():
        m = sources == s
        w[m] = f * total / m.sum()
    if rest.any():
        w[rest] = (1.0 - sum(named.values())) * total / rest.sum()
    return w


#: Of the text → image fit's weight, what the concept queries carry (the captions carry
#: the rest). On dev, shares 0.25 / 0.15 / 0.1 / 0.05 gave a caption ECE of 0.078 / 0.047
#: / 0.033 / 0.018 and 6 / 6 / 5 / 1 of 10 absent concepts "no match": 0.1 keeps the ECE
#: under 0.05 with the most "no match" left.
CONCEPT_SHARE = {"concepts": 0.1, "concepts-absent": 0.1}


def fit(
    pools: Mapping[str, Pool],
    concept_share: Mapping[str, float] = CONCEPT_SHARE,
    names: Mapping[str, Sequence[str]] | None = None,
    named: bool = False,
) -> dict[str, KindModel]:
    """Each kind's model on its pooled hits (``named``: those with evidence), reading
    ``names[kind]`` (default ``KIND_FEATURES``), text → image weighted by ``concept_share``."""
    out = {}
    chosen = names or KIND_FEATURES
    for kind, pool in pools.items():
        if kind not in chosen:
            continue
        x, y, g, s = pool.arrays(named=named)
        if len(y) == 0 or y.min() == y.max():
            continue
        w = source_weights(s, concept_share) if kind == "text-image" else None
        out[kind] = fit_kind(x, y, g, chosen[kind], w)
    return out


#: The features of the evidence models (text → image only). On dev the concept AUROC was
#: 0.889 with the raw evidence, 0.899 with its log (which reads evidence ≈ 0 as a strong
#: sign against).
EVIDENCE_FEATURES: dict[str, tuple[str, ...]] = {
    "text-image": ("score", "mean", "lead", "log_words", "log_evidence")
}
#: The same for galleries of fewer than ``TOP`` photos.
EVIDENCE_SMALL_FEATURES: dict[str, tuple[str, ...]] = {"text-image": ("score", "log_evidence")}


def fit_evidence(
    pools: Mapping[str, Pool], concept_share: Mapping[str, float] = CONCEPT_SHARE
) -> tuple[dict[str, KindModel], dict[str, KindModel]]:
    """The evidence models and their small-gallery ones, on the hits with evidence."""
    full = fit(pools, concept_share, EVIDENCE_FEATURES, named=True)
    small = fit(pools, concept_share, EVIDENCE_SMALL_FEATURES, named=True)
    return full, small


def fit_small(
    pools: Mapping[str, Pool], concept_share: Mapping[str, float] = CONCEPT_SHARE
) -> dict[str, KindModel]:
    """Each kind's score-only model (``RelevanceModel.small``)."""
    return fit(pools, concept_share, {k: SMALL_FEATURES for k in pools})
