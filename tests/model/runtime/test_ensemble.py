"""An ensemble of checkpoints scores the weighted mean of its members' scores."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.checkpoints import CheckpointError, load_checkpoint
from groundsearch.model.runtime.ensemble import EnsembleEmbedder


def test_the_ensemble_score_is_the_weighted_mean(parser):
    path = get_settings().default_checkpoint
    a = load_checkpoint(path, parser=parser.version, concept_weight=0)
    b = load_checkpoint(path, parser=parser.version, concept_weight=1.0)
    ens = EnsembleEmbedder([a, b], weights=[3, 1])
    trees = parser.parse(["a dog runs on the beach", "an armadillo"])
    feats = np.random.default_rng(0).random((3, 1280)).astype(np.float32)
    expected = 0.75 * (a.embed_images(feats) @ a.embed_sentences(trees).T) + 0.25 * (
        b.embed_images(feats) @ b.embed_sentences(trees).T
    )
    np.testing.assert_allclose(
        ens.embed_images(feats) @ ens.embed_sentences(trees).T, expected, atol=1e-5
    )
    assert ens.encoder == "sdt-rnn+sdt-rnn"


def test_members_must_read_the_same_inputs():
    a = SimpleNamespace(parser="p1", backbone="efficientnet-lite2")
    b = SimpleNamespace(parser="p2", backbone="efficientnet-lite2")
    with pytest.raises(CheckpointError, match="parser"):
        EnsembleEmbedder([a, b])  # type: ignore[list-item]
    with pytest.raises(CheckpointError, match="at least two"):
        EnsembleEmbedder([a])  # type: ignore[list-item]
    with pytest.raises(CheckpointError, match="positive weight"):
        EnsembleEmbedder([a, a], weights=[1, 0])  # type: ignore[list-item]
