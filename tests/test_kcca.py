"""kCCA finds the shared signal of two views and ranks matching pairs first."""

from __future__ import annotations

import numpy as np
import pytest

from model.baselines.kcca import KCCA
from model.evaluation.retrieval import retrieval_metrics


def views(n: int, seed: int):
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=(n, 3))
    a = np.tanh(shared @ rng.normal(size=(3, 10))) + 0.1 * rng.normal(size=(n, 10))
    b = (shared @ rng.normal(size=(3, 12))) ** 3 + 0.1 * rng.normal(size=(n, 12))
    return a, b


def test_kcca_correlates_and_retrieves_held_out_pairs():
    a, b = views(600, 0)
    model = KCCA.fit(a[:500], b[:500], dim=5, n_landmarks=200)
    assert model.correlations[0] > 0.9
    sa, sb = model.project_sentences(a[500:]), model.project_images(b[500:])
    sa /= np.linalg.norm(sa, axis=1, keepdims=True)
    sb /= np.linalg.norm(sb, axis=1, keepdims=True)
    m = retrieval_metrics(sb @ sa.T, np.arange(100))
    assert m["t2i"]["R@10"] > 50  # chance is 10


def test_kcca_needs_matching_rows():
    with pytest.raises(ValueError, match="matching"):
        KCCA.fit(np.zeros((3, 2)), np.zeros((4, 2)))
