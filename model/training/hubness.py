"""Choosing the hubness correction (``model.runtime.hubness``) on the dev splits: each
side's bank of training items (``bank_rows``), its ``k`` and weight (``choose``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundsearch.model.runtime.hubness import bank_means
from groundsearch.model.training.evaluation.retrieval import retrieval_metrics

BANK = 10_000
KS = (10, 25, 50, 100, 200)
WEIGHTS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1)


@dataclass(frozen=True)
class DevSplit:
    """One collection's dev split embedded: photo and caption vectors, each caption's photo."""

    name: str
    photos: np.ndarray
    captions: np.ndarray
    caption_image: np.ndarray


def bank_rows(sizes: Sequence[int], bank: int = BANK, seed: int = 0) -> list[np.ndarray]:
    """For collections of ``sizes`` captions, which of each go into a bank of ``bank``
    (in proportion to their sizes; all of them when they hold fewer)."""
    rng = np.random.default_rng(seed)
    total = sum(sizes)
    take = min(bank, total)
    return [np.sort(rng.choice(n, min(n, round(take * n / total)), replace=False)) for n in sizes]


#: The sides a bank corrects: text → photo scores (a bank of captions) and photo →
#: caption scores (a bank of photos).
SIDES = {"photos": "t2i", "captions": "i2t"}


def recall_sum(scores: np.ndarray, caption_image: np.ndarray, direction: str) -> float:
    """R@1 + R@5 + R@10 of one direction (``scores``: photos × captions)."""
    m = retrieval_metrics(scores, caption_image)[direction]
    return float(m["R@1"] + m["R@5"] + m["R@10"])


def choose(
    splits: Sequence[DevSplit],
    bank: np.ndarray,
    side: str = "photos",
    ks: Sequence[int] = KS,
    weights: Sequence[float] = WEIGHTS,
) -> dict[str, Any]:
    """The best (k, weight) of one side's penalty on ``splits`` (ties: the first in grid
    order, weight 0 first), every grid point's figures and the uncorrected ones."""
    direction = SIDES[side]
    grid: list[dict[str, Any]] = []
    raw = [s.photos @ s.captions.T for s in splits]
    for k in ks:
        if side == "photos":
            taken = [bank_means(s.photos, bank, k)[:, None] for s in splits]
        else:
            taken = [bank_means(s.captions, bank, k)[None, :] for s in splits]
        for w in weights:
            sums = {
                s.name: round(recall_sum(r - w * m, s.caption_image, direction), 2)
                for s, r, m in zip(splits, raw, taken, strict=True)
            }
            grid.append({"k": k, "weight": w, **sums, "mean": float(np.mean(list(sums.values())))})
    best = max(grid, key=lambda row: row["mean"])
    raw_row = next(row for row in grid if row["weight"] == 0.0)
    return {"k": best["k"], "weight": best["weight"], "best": best, "raw": raw_row, "grid": grid}
