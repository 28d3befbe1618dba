"""Retrieval metrics against a brute-force reference on seeded data."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.model.training.evaluation.retrieval import retrieval_metrics


def brute_force(scores: np.ndarray, caption_image: np.ndarray) -> dict[str, object]:
    n_img, n_cap = scores.shape
    t2i = []
    for j in range(n_cap):
        order = sorted(range(n_img), key=lambda i: -scores[i, j])
        t2i.append(order.index(caption_image[j]) + 1)
    i2t = []
    for i in range(n_img):
        order = sorted(range(n_cap), key=lambda j: -scores[i, j])
        i2t.append(min(order.index(j) + 1 for j in range(n_cap) if caption_image[j] == i))

    def summary(ranks):
        r = np.array(ranks)
        return {
            "R@1": 100 * np.mean(r <= 1),
            "R@5": 100 * np.mean(r <= 5),
            "R@10": 100 * np.mean(r <= 10),
            "median_rank": np.median(r),
            "mean_rank": np.mean(r),
        }

    a, b = summary(i2t), summary(t2i)
    return {"i2t": a, "t2i": b, "rsum": sum(a[f"R@{k}"] + b[f"R@{k}"] for k in (1, 5, 10))}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_img = 40
    caption_image = np.repeat(np.arange(n_img), 5)
    scores = rng.normal(size=(n_img, len(caption_image)))
    scores[caption_image, np.arange(len(caption_image))] += rng.uniform(0, 3)  # some signal
    got, want = retrieval_metrics(scores, caption_image), brute_force(scores, caption_image)
    for direction in ("i2t", "t2i"):
        for key, value in want[direction].items():
            assert got[direction][key] == pytest.approx(value)
    assert got["rsum"] == pytest.approx(want["rsum"])


def test_perfect_scores_give_rank_one():
    caption_image = np.repeat(np.arange(3), 2)
    scores = (caption_image[None, :] == np.arange(3)[:, None]).astype(float)
    m = retrieval_metrics(scores, caption_image)
    assert m["rsum"] == 600 and m["i2t"]["mean_rank"] == 1 and m["t2i"]["median_rank"] == 1


def test_shape_mismatch_is_named():
    with pytest.raises(ValueError, match="matching 4 captions"):
        retrieval_metrics(np.zeros((2, 3)), np.array([0, 0, 1, 1]))
