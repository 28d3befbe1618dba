"""Retrieval metrics against a brute-force reference on seeded data."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.model.training.evaluation.retrieval import (
    bootstrap_intervals,
    i2t_ranks,
    paired_bootstrap,
    retrieval_metrics,
    t2i_by_group,
    t2i_ranks,
)


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
            "R@20": 100 * np.mean(r <= 20),
            "R@50": 100 * np.mean(r <= 50),
            "median_rank": np.median(r),
            "mean_rank": np.mean(r),
        }

    a, b = summary(i2t), summary(t2i)
    return {"i2t": a, "t2i": b, "rsum": sum(a[f"R@{k}"] + b[f"R@{k}"] for k in (1, 5, 10))}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_img = 70  # R@50 of image search below 100
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


def noisy_scores(seed: int, n_img: int = 30, per_image: int = 5):
    rng = np.random.default_rng(seed)
    caption_image = np.repeat(np.arange(n_img), per_image)
    scores = rng.normal(size=(n_img, len(caption_image)))
    scores[caption_image, np.arange(len(caption_image))] += 1.5
    return scores, caption_image


def test_bootstrap_matches_resampling_by_hand():
    """Each draw of photos, scored by brute force from the full-gallery ranks."""
    scores, caption_image = noisy_scores(0)
    got = bootstrap_intervals(scores, caption_image, resamples=200, seed=7)
    i2t, t2i = i2t_ranks(scores, caption_image), t2i_ranks(scores, caption_image)
    draws = np.random.default_rng(7).integers(0, 30, size=(200, 30))
    r10_t2i, rsum, mean_i2t = [], [], []
    for draw in draws:
        caps = np.concatenate([np.flatnonzero(caption_image == i) for i in draw])
        r_i2t, r_t2i = i2t[draw], t2i[caps]
        r10_t2i.append(100 * np.mean(r_t2i <= 10))
        mean_i2t.append(np.mean(r_i2t))
        rsum.append(sum(100 * np.mean(r <= k) for r in (r_i2t, r_t2i) for k in (1, 5, 10)))
    assert got["t2i"]["R@10"] == pytest.approx(list(np.percentile(r10_t2i, [2.5, 97.5])))
    assert got["i2t"]["mean_rank"] == pytest.approx(list(np.percentile(mean_i2t, [2.5, 97.5])))
    assert got["rsum"] == pytest.approx(list(np.percentile(rsum, [2.5, 97.5])))
    assert set(got["i2t"]) == {"R@1", "R@5", "R@10", "R@20", "R@50", "mean_rank"}
    assert (got["resamples"], got["seed"], got["level"]) == (200, 7, 0.95)


def test_bootstrap_interval_holds_the_estimate_and_is_repeatable():
    scores, caption_image = noisy_scores(1)
    point = retrieval_metrics(scores, caption_image)
    ci = bootstrap_intervals(scores, caption_image, resamples=300)
    for side in ("i2t", "t2i"):
        for key in ("R@1", "R@5", "R@10", "mean_rank"):
            low, high = ci[side][key]
            assert low <= point[side][key] <= high
    assert ci["rsum"][0] < point["rsum"] < ci["rsum"][1]
    assert bootstrap_intervals(scores, caption_image, resamples=300) == ci
    perfect = (caption_image[None, :] == np.arange(30)[:, None]).astype(float)
    assert bootstrap_intervals(perfect, caption_image, resamples=10)["rsum"] == [600, 600]


def test_bootstrap_refuses_bad_settings():
    scores, caption_image = noisy_scores(2)
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_intervals(scores, caption_image, resamples=0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_intervals(scores, caption_image, level=1.0)


def test_t2i_by_group_scores_each_group_on_the_whole_gallery():
    scores, caption_image = noisy_scores(3)
    mask = np.arange(len(caption_image)) % 3 == 0
    got = t2i_by_group(scores, caption_image, {"a": mask, "b": ~mask, "none": mask & ~mask})
    ranks = t2i_ranks(scores, caption_image)
    assert got["a"]["captions"] == mask.sum() and got["b"]["captions"] == (~mask).sum()
    assert got["a"]["R@5"] == pytest.approx(100 * np.mean(ranks[mask] <= 5))
    assert got["b"]["mean_rank"] == pytest.approx(np.mean(ranks[~mask]))
    assert got["none"] == {"captions": 0}
    with pytest.raises(ValueError, match="group 'x'"):
        t2i_by_group(scores, caption_image, {"x": mask[:-1]})


def test_paired_bootstrap_uses_the_same_draws_for_both_models():
    scores, caption_image = noisy_scores(4)
    better = scores.copy()
    better[caption_image, np.arange(len(caption_image))] += 1.0  # every correct pair higher
    got = paired_bootstrap(scores, better, caption_image, resamples=200, seed=3)
    a, b = retrieval_metrics(scores, caption_image), retrieval_metrics(better, caption_image)
    assert got["rsum"]["difference"] == pytest.approx(b["rsum"] - a["rsum"])
    assert got["t2i"]["mean_rank"]["difference"] == pytest.approx(
        b["t2i"]["mean_rank"] - a["t2i"]["mean_rank"]
    )
    low, high = got["rsum"]["ci95"]
    assert 0 < low <= got["rsum"]["difference"] <= high  # better on every draw
    # the paired interval is that of the per-draw differences of the separate bootstraps
    draws = np.random.default_rng(3).integers(0, 30, size=(200, 30))
    t2i_a, t2i_b = t2i_ranks(scores, caption_image), t2i_ranks(better, caption_image)
    diffs = []
    for draw in draws:
        caps = np.concatenate([np.flatnonzero(caption_image == i) for i in draw])
        diffs.append(100 * (np.mean(t2i_b[caps] <= 5) - np.mean(t2i_a[caps] <= 5)))
    assert got["t2i"]["R@5"]["ci95"] == pytest.approx(list(np.percentile(diffs, [2.5, 97.5])))
    same = paired_bootstrap(scores, scores, caption_image, resamples=50)
    assert same["rsum"] == {"difference": 0.0, "ci95": [0.0, 0.0]}
    with pytest.raises(ValueError, match="differ"):
        paired_bootstrap(scores, scores[:-1], caption_image)


def test_image_search_may_rank_by_its_own_scores_and_description_by_the_raw():
    rng = np.random.default_rng(5)
    scores = rng.normal(size=(6, 18))
    search = scores - rng.uniform(size=(6, 1))  # each photo's penalty taken off
    ci = np.repeat(np.arange(6), 3)
    both = retrieval_metrics(scores, ci, search)
    assert both["i2t"] == retrieval_metrics(scores, ci)["i2t"]
    assert both["t2i"] == retrieval_metrics(search, ci)["t2i"]
    assert both["rsum"] == pytest.approx(
        sum(both[d][f"R@{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10))
    )
    ci95 = bootstrap_intervals(scores, ci, resamples=30, search=search)
    assert ci95["t2i"] == bootstrap_intervals(search, ci, resamples=30)["t2i"]
    assert ci95["i2t"] == bootstrap_intervals(scores, ci, resamples=30)["i2t"]
