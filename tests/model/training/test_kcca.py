"""kCCA finds the shared signal of two views and ranks matching pairs first; as a
retrieval model it is fitted on a few real photos, saved and loaded back."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.checkpoints import (
    CheckpointError,
    load_checkpoint,
    save_joint,
    save_kcca,
)
from groundsearch.model.runtime.embedder import JointEmbedder
from groundsearch.model.runtime.joint import JointConfig, JointModel
from groundsearch.model.runtime.kcca import KCCAModel
from groundsearch.model.runtime.text import NoKnownWordError
from groundsearch.model.runtime.text.glove import glove_vocabulary
from groundsearch.model.training.corpus import build_split
from groundsearch.model.training.evaluation.retrieval import retrieval_metrics
from groundsearch.model.training.kcca import KCCA, KCCAConfig, fit_kcca


def views(n: int, seed: int):
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=(n, 3))
    a = np.tanh(shared @ rng.normal(size=(3, 10))) + 0.1 * rng.normal(size=(n, 10))
    b = (shared @ rng.normal(size=(3, 12))) ** 3 + 0.1 * rng.normal(size=(n, 12))
    return a, b


def fit(sentences, images, **options) -> KCCA:
    """One kCCA at regularisation 1e-2 (``sentences[k]`` and ``images[k]``: a matching pair)."""
    return KCCA.fit_grid(sentences, images, (1e-2,), **options)[0]


def test_kcca_correlates_and_retrieves_held_out_pairs():
    a, b = views(600, 0)
    model = fit(a[:500], b[:500], dim=5, n_landmarks=200)
    assert model.correlations[0] > 0.9
    sa, sb = model.project_sentences(a[500:]), model.project_images(b[500:])
    sa /= np.linalg.norm(sa, axis=1, keepdims=True)
    sb /= np.linalg.norm(sb, axis=1, keepdims=True)
    m = retrieval_metrics(sb @ sa.T, np.arange(100))
    assert m["t2i"]["R@10"] > 50  # chance is 10


def test_kcca_needs_matching_rows():
    with pytest.raises(ValueError, match="matching"):
        fit(np.zeros((3, 2)), np.zeros((4, 2)))


def test_truncated_model_is_the_model_fitted_with_fewer_dims():
    a, b = views(300, 1)
    small = fit(a, b, dim=3, n_landmarks=80)
    cut = fit(a, b, dim=6, n_landmarks=80).truncated(3)
    np.testing.assert_allclose(cut.project_sentences(a), small.project_sentences(a), atol=1e-10)
    np.testing.assert_allclose(cut.project_images(b), small.project_images(b), atol=1e-10)


def test_folded_projections_equal_the_projections():
    a, b = views(200, 2)
    model = fit(a, b, dim=4, n_landmarks=60)
    sent, img = model.folded()
    np.testing.assert_allclose(sent(a), model.project_sentences(a), atol=1e-8)
    np.testing.assert_allclose(img(b), model.project_images(b), atol=1e-8)


def test_landmarks_are_distinct_rows():
    a, b = views(40, 3)
    model = fit(np.repeat(a, 5, axis=0), np.repeat(b, 5, axis=0), dim=3, n_landmarks=100)
    assert len(model.img_map.landmarks) == 40
    assert len(np.unique(model.img_map.landmarks, axis=0)) == 40


@pytest.fixture(scope="module")
def fitted(tiny_flickr, parser, extractor):
    """kCCA fitted on 12 Flickr8k photos (60 captions), selected on 4 dev photos."""
    splits = {
        s: build_split(load_captioned_images(tiny_flickr, split=s), parser, extractor)
        for s in ("train", "dev", "test")
    }
    vocab = glove_vocabulary(t.words for t in splits["train"].trees)
    cfg = KCCAConfig(n_landmarks=30, dims=(4, 8), regs=(0.1, 1.0))
    model, dev, grid = fit_kcca(
        splits["train"], splits["dev"], vocab, parser.version, extractor.identity, cfg
    )
    return model, dev, grid, splits


def test_fit_selects_the_best_dev_rsum_of_the_grid(fitted):
    model, dev, grid, _ = fitted
    assert [(g["reg"], g["dim"]) for g in grid] == [(0.1, 4), (0.1, 8), (1.0, 4), (1.0, 8)]
    best = max(grid, key=lambda g: g["dev_rsum"])
    assert (model.config["reg"], model.config["dim"]) == (best["reg"], best["dim"])
    assert dev["rsum"] == pytest.approx(best["dev_rsum"])


def test_checkpoint_round_trip_and_identity_checks(fitted, tmp_path, parser, extractor):
    model, _, _, splits = fitted
    test = splits["test"]
    save_kcca(model, tmp_path / "k.pt", extra={"encoder": "kcca"})
    loaded = load_checkpoint(tmp_path / "k.pt", parser.version, "efficientnet-lite0")
    assert isinstance(loaded, KCCAModel) and loaded.extra == {"encoder": "kcca"}
    y = loaded.embed_sentences(test.trees)
    np.testing.assert_array_equal(y, model.embed_sentences(test.trees))
    np.testing.assert_array_equal(
        loaded.embed_images(test.features), model.embed_images(test.features)
    )
    np.testing.assert_allclose(np.linalg.norm(y, axis=1), 1.0)
    with pytest.raises(CheckpointError, match="fitted with parser"):
        load_checkpoint(tmp_path / "k.pt", parser="another-parser")
    with pytest.raises(CheckpointError, match="efficientnet-lite0 image features"):
        load_checkpoint(tmp_path / "k.pt", backbone="efficientnet-lite2")
    with pytest.raises(ValueError, match="N × 1280"):
        loaded.embed_images(test.features[:, :10])


def test_load_checkpoint_dispatches_on_kind(fitted, tmp_path, parser):
    model, _, _, splits = fitted
    joint = JointModel(
        JointConfig(encoder="bow"), model.vocab, None, parser.version, "efficientnet-lite0"
    )
    save_joint(joint, tmp_path / "j.pt", extra={"train": {"normalize": True}})
    loaded = load_checkpoint(tmp_path / "j.pt", parser=parser.version)
    assert isinstance(loaded, JointEmbedder) and loaded.normalize and loaded.encoder == "bow"
    assert loaded.embed_images(splits["test"].features).shape == (4, 50)
    with pytest.raises(CheckpointError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "none.pt")


def test_a_sentence_of_unknown_words_is_refused_and_has_no_shares(fitted, parser):
    model = fitted[0]
    known, unknown = parser.parse(["A dog runs on the grass .", "zqxv wpqk"])
    model.require_known_words([known], "query")
    with pytest.raises(NoKnownWordError, match=r"query .*has no word the model knows"):
        model.require_known_words([unknown], "query")
    assert model.shares(known) is None
