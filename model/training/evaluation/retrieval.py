"""Image search and image description metrics (R@K, median and mean rank, rsum), their
bootstrap confidence intervals, and image search split by a property of the captions.

``scores[i, j]`` is the similarity of image ``i`` and caption ``j``, ``caption_image[j]``
caption ``j``'s image. Ranks are 1-based: t2i the rank of a caption's own image, i2t the
rank of an image's best correct caption.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: The R@K of rsum (the papers' six figures).
RECALL_AT = (1, 5, 10)
#: Reported as well (Dufour et al.'s Table 3 adds R@20 and R@50), not in rsum.
WIDE_RECALL_AT = (20, 50)
ALL_RECALL_AT = RECALL_AT + WIDE_RECALL_AT


def t2i_ranks(scores: np.ndarray, caption_image: np.ndarray) -> np.ndarray:
    """Rank of the correct image for every caption."""
    correct = scores[caption_image, np.arange(scores.shape[1])]
    return 1 + (scores > correct[None, :]).sum(axis=0)


def i2t_ranks(scores: np.ndarray, caption_image: np.ndarray) -> np.ndarray:
    """Rank of the best correct caption for every image."""
    n_images = scores.shape[0]
    own = caption_image[None, :] == np.arange(n_images)[:, None]
    if not own.any(axis=1).all():
        raise ValueError("every image needs at least one caption")
    best = np.where(own, scores, -np.inf).max(axis=1)
    return 1 + (scores > best[:, None]).sum(axis=1)


def summarize(ranks: np.ndarray) -> dict[str, float]:
    """R@1/5/10/20/50 (percent), median and mean rank."""
    out = {f"R@{k}": float(100.0 * np.mean(ranks <= k)) for k in ALL_RECALL_AT}
    out["median_rank"] = float(np.median(ranks))
    out["mean_rank"] = float(np.mean(ranks))
    return out


def _checked(scores: np.ndarray, caption_image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64)
    caption_image = np.asarray(caption_image, dtype=np.int64)
    if scores.ndim != 2 or scores.shape[1] != len(caption_image) or scores.size == 0:
        raise ValueError(
            f"scores must be images × captions matching {len(caption_image)} captions, "
            f"got shape {scores.shape}"
        )
    return scores, caption_image


def retrieval_metrics(
    scores: np.ndarray, caption_image: np.ndarray, search: np.ndarray | None = None
) -> dict[str, Any]:
    """Both directions and rsum (R@1/5/10 summed; R@20 and R@50 reported only); image
    search (t2i) ranks by ``search`` when given (the hubness-corrected scores)."""
    scores, caption_image = _checked(scores, caption_image)
    search = scores if search is None else _checked(search, caption_image)[0]
    i2t = summarize(i2t_ranks(scores, caption_image))
    t2i = summarize(t2i_ranks(search, caption_image))
    rsum = sum(i2t[f"R@{k}"] + t2i[f"R@{k}"] for k in RECALL_AT)
    return {"i2t": i2t, "t2i": t2i, "rsum": rsum}


def _per_image(values: np.ndarray, caption_image: np.ndarray, n_images: int) -> np.ndarray:
    """Sums of per-caption ``values`` (captions × m) for each image (images × m)."""
    out = np.zeros((n_images, values.shape[1]))
    np.add.at(out, caption_image, values)
    return out


def _interval(samples: np.ndarray, level: float) -> list[list[float]]:
    """Percentile intervals, one ``[low, high]`` per column of ``samples``."""
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(samples, [tail, 100 - tail], axis=0)
    return [[float(a), float(b)] for a, b in zip(low, high, strict=True)]


def bootstrap_intervals(
    scores: np.ndarray,
    caption_image: np.ndarray,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    search: np.ndarray | None = None,
) -> dict[str, Any]:
    """Percentile bootstrap intervals of R@K, mean rank and rsum, resampling the test
    photos with their captions (Merkx & Frank 2019), both directions on the same draws."""
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"need resamples ≥ 1 and 0 < level < 1, got {resamples}, {level}")
    scores, caption_image = _checked(scores, caption_image)
    draws = _draws(scores.shape[0], resamples, seed)
    stats, rsum = _resampled(scores, caption_image, draws, search)
    out: dict[str, Any] = {}
    for side, values in stats.items():
        spans = _interval(values, level)
        out[side] = {f"R@{k}": span for k, span in zip(ALL_RECALL_AT, spans, strict=False)}
        out[side]["mean_rank"] = spans[-1]
    out["rsum"] = _interval(rsum[:, None], level)[0]
    out.update(resamples=resamples, seed=seed, level=level)
    return out


def _draws(n_images: int, resamples: int, seed: int) -> np.ndarray:
    if resamples < 1:
        raise ValueError(f"need resamples ≥ 1, got {resamples}")
    return np.random.default_rng(seed).integers(0, n_images, size=(resamples, n_images))


def _resampled(
    scores: np.ndarray,
    caption_image: np.ndarray,
    draws: np.ndarray,
    search: np.ndarray | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """For each draw of photos (rows of ``draws``): R@K of ``ALL_RECALL_AT`` and the mean
    rank (resamples × (len(K) + 1)) in each direction, and rsum (resamples)."""
    n_images = scores.shape[0]
    ks = np.array(ALL_RECALL_AT)
    i2t = i2t_ranks(scores, caption_image)
    t2i = t2i_ranks(scores if search is None else search, caption_image)
    # per photo: hits at each K, the rank sum and the query count, in each direction
    i2t_rows = np.column_stack([i2t[:, None] <= ks[None, :], i2t, np.ones(n_images)])
    t2i_cols = np.column_stack([t2i[:, None] <= ks[None, :], t2i, np.ones(len(t2i))])
    t2i_rows = _per_image(t2i_cols.astype(np.float64), caption_image, n_images)
    stats: dict[str, np.ndarray] = {}
    rsum = np.zeros(len(draws))
    for name, rows in (("i2t", i2t_rows), ("t2i", t2i_rows)):
        totals = rows[draws].sum(axis=1)  # resamples × (len(ks) + 2)
        queries = totals[:, -1:]
        recall = 100.0 * totals[:, : len(ks)] / queries
        rsum += recall[:, : len(RECALL_AT)].sum(axis=1)
        stats[name] = np.column_stack([recall, totals[:, len(ks)] / queries[:, 0]])
    return stats, rsum


def paired_bootstrap(
    scores_a: np.ndarray,
    scores_b: np.ndarray,
    caption_image: np.ndarray,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """``b − a`` of R@K, mean rank and rsum for two models on the same split, each with an
    interval from the same bootstrap draws for both (paired)."""
    if not 0 < level < 1:
        raise ValueError(f"need 0 < level < 1, got {level}")
    scores_a, caption_image = _checked(scores_a, caption_image)
    scores_b, _ = _checked(scores_b, caption_image)
    if scores_a.shape != scores_b.shape:
        raise ValueError(f"the two score matrices differ: {scores_a.shape} vs {scores_b.shape}")
    draws = _draws(scores_a.shape[0], resamples, seed)
    stats_a, rsum_a = _resampled(scores_a, caption_image, draws)
    stats_b, rsum_b = _resampled(scores_b, caption_image, draws)
    point_a, point_b = (retrieval_metrics(x, caption_image) for x in (scores_a, scores_b))
    names = [f"R@{k}" for k in ALL_RECALL_AT] + ["mean_rank"]
    out: dict[str, Any] = {}
    for side in ("i2t", "t2i"):
        spans = _interval(stats_b[side] - stats_a[side], level)
        out[side] = {
            name: {"difference": point_b[side][name] - point_a[side][name], "ci95": span}
            for name, span in zip(names, spans, strict=True)
        }
    out["rsum"] = {
        "difference": point_b["rsum"] - point_a["rsum"],
        "ci95": _interval((rsum_b - rsum_a)[:, None], level)[0],
    }
    out.update(resamples=resamples, seed=seed, level=level)
    return out


def t2i_by_group(
    scores: np.ndarray, caption_image: np.ndarray, groups: dict[str, np.ndarray]
) -> dict[str, dict[str, float]]:
    """Image search metrics of each group of captions (``groups[name]``: a mask; each
    still ranks the whole gallery), with its caption count."""
    scores, caption_image = _checked(scores, caption_image)
    ranks = t2i_ranks(scores, caption_image)
    out: dict[str, dict[str, float]] = {}
    for name, mask in groups.items():
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != ranks.shape:
            raise ValueError(f"group {name!r}: mask of {mask.shape} for {len(ranks)} captions")
        chosen = ranks[mask]
        out[name] = {"captions": int(mask.sum()), **(summarize(chosen) if len(chosen) else {})}
    return out
