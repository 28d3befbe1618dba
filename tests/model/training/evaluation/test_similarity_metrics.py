"""Sentence similarity metrics against brute force, and the judgment file readers."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.training.evaluation.similarity import (
    pearson,
    rankdata,
    read_expert,
    read_sick,
    read_sts,
    same_image_mean_rank,
    spearman,
)

DATA = get_settings().data_dir


def test_same_image_mean_rank_matches_brute_force():
    rng = np.random.default_rng(3)
    links = np.repeat(np.arange(30), 5)
    y = rng.normal(size=(len(links), 8)) + 2 * rng.normal(size=(30, 8))[links]
    unit = y / np.linalg.norm(y, axis=1, keepdims=True)
    ranks = []
    for j in range(len(y)):
        others = [k for k in range(len(y)) if k != j]
        order = sorted(others, key=lambda k: -(unit[j] @ unit[k]))
        ranks.append(min(order.index(k) + 1 for k in others if links[k] == links[j]))
    assert same_image_mean_rank(y, links) == pytest.approx(np.mean(ranks))


def test_rankdata_averages_ties_and_spearman_is_rank_pearson():
    np.testing.assert_array_equal(rankdata([10, 20, 20, 5]), [2, 3.5, 3.5, 1])
    a, b = np.array([1, 2, 3, 4, 5.0]), np.array([2, 4, 6, 8, 100.0])
    assert spearman(a, b) == pytest.approx(1.0)
    assert pearson(a, -a) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="equal-length"):
        pearson([1.0], [1.0])


def test_judgment_files_read_as_documented():
    a, b, s = read_sts(DATA / "stsbenchmark" / "sts-test.csv")
    assert len(a) == len(b) == len(s) == 1379 and s.min() >= 0 and s.max() <= 5
    a, b, s = read_sick(DATA / "sick" / "SICK.txt", "TEST")
    assert len(a) == 4906 and s.min() >= 1 and s.max() <= 5
    expert = read_expert(DATA / "flickr8k" / "ExpertAnnotations.txt")
    assert len(expert) == 5822 and "#" in expert[0][1]
