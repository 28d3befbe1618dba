"""Image search and image description metrics (R@K, median and mean rank, rsum).

``scores[i, j]`` is the similarity of image ``i`` and caption ``j``; ``caption_image[j]``
is the image caption ``j`` belongs to. Ranks are 1-based.

- image search (t2i): each caption ranks all images; the rank of its own image.
- describing images (i2t): each image ranks all captions; the rank of its best
  (highest-ranked) correct caption.
"""

from __future__ import annotations

from typing import Any

import numpy as np

RECALL_AT = (1, 5, 10)


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
    """R@1/5/10 (percent), median and mean rank."""
    out = {f"R@{k}": float(100.0 * np.mean(ranks <= k)) for k in RECALL_AT}
    out["median_rank"] = float(np.median(ranks))
    out["mean_rank"] = float(np.mean(ranks))
    return out


def retrieval_metrics(scores: np.ndarray, caption_image: np.ndarray) -> dict[str, Any]:
    """Both directions and rsum (the six R@K summed)."""
    scores = np.asarray(scores, dtype=np.float64)
    caption_image = np.asarray(caption_image, dtype=np.int64)
    if scores.ndim != 2 or scores.shape[1] != len(caption_image) or scores.size == 0:
        raise ValueError(
            f"scores must be images × captions matching {len(caption_image)} captions, "
            f"got shape {scores.shape}"
        )
    i2t = summarize(i2t_ranks(scores, caption_image))
    t2i = summarize(t2i_ranks(scores, caption_image))
    rsum = sum(i2t[f"R@{k}"] + t2i[f"R@{k}"] for k in RECALL_AT)
    return {"i2t": i2t, "t2i": t2i, "rsum": rsum}
