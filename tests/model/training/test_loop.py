"""A short training run on a handful of real Flickr8k photos and captions."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.checkpoints import load_joint, save_joint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.joint import JointConfig, JointModel, build_inventory
from groundsearch.model.runtime.text.glove import glove_vocabulary
from groundsearch.model.training.loop import Split, TrainConfig, evaluate, train


@pytest.fixture(scope="module")
def small(parser, tmp_path_factory):
    torch.set_num_threads(1)
    ds = load_captioned_images(get_settings().data_dir / "flickr8k", split="train")
    n_img = 12
    caps = [c for c, i in zip(ds.captions, ds.caption_image, strict=True) if i < n_img]
    links = np.array([i for i in ds.caption_image if i < n_img])
    trees = parser.parse(caps)
    feats = FeatureExtractor(cache_dir=tmp_path_factory.mktemp("f")).embed_files(
        [ds.image_path(i) for i in range(n_img)]
    )
    return Split(trees, feats, links), parser.version


@pytest.mark.parametrize("encoder,optimizer", [("sdt-rnn", "adagrad"), ("bow", "adam-cyclic")])
def test_training_lowers_the_loss(small, encoder, optimizer):
    split, parser_version = small
    vocab = glove_vocabulary([t.words for t in split.trees])
    config = JointConfig.from_dict({"encoder": encoder, "relation_min_count": 1})
    model = JointModel(
        config, vocab, build_inventory(config, split.trees), parser_version, "efficientnet-lite0"
    )
    before = evaluate(model, split, normalize=True)["rsum"]
    cfg = TrainConfig(
        epochs=8,
        batch_size=20,
        optimizer=optimizer,
        normalize=True,
        margin=0.2,
        lr=0.05 if optimizer == "adagrad" else 0.005,
        cycles=2,
    )
    hist = train(model, split, split, cfg)
    assert hist.loss[-1] < hist.loss[0]
    assert max(hist.dev_rsum) > before
    assert evaluate(model, split, normalize=True)["rsum"] == pytest.approx(max(hist.dev_rsum))


def test_bad_splits_and_configs_are_named():
    with pytest.raises(ValueError, match="at least one caption"):
        Split([], np.zeros((0, 4)), np.zeros(0, int))
    with pytest.raises(ValueError, match="unknown optimizer 'sgd'"):
        TrainConfig(optimizer="sgd")


def test_snapshot_ensemble_scores_are_the_members_mean(small, tmp_path):
    split, parser_version = small
    vocab = glove_vocabulary([t.words for t in split.trees])
    config = JointConfig(encoder="bow")
    model = JointModel(config, vocab, None, parser_version, "efficientnet-lite0")
    cfg = TrainConfig(
        epochs=4,
        batch_size=20,
        optimizer="adam-cyclic",
        normalize=True,
        margin=0.2,
        lr=0.005,
        cycles=2,
        ensemble=True,
    )
    hist = train(model, split, split, cfg)
    assert len(hist.snapshots) == 2 and hist.ensemble_dev_rsum is not None
    # the ensemble is kept only when it beats the best single epoch on dev
    kept = hist.ensemble_dev_rsum >= max(hist.dev_rsum)
    assert len(model.snapshots) == (2 if kept else 0)
    model.snapshots = hist.snapshots
    scores = []
    for state in model.snapshots:
        member = JointModel(config, vocab, None, parser_version, "efficientnet-lite0")
        member.load_state_dict(state)
        v = member.embed_images(split.features, normalize=True)
        y = member.embed_sentences(split.trees, normalize=True)
        scores.append(v @ y.T)
    v = model.embed_images(split.features, normalize=True)
    y = model.embed_sentences(split.trees, normalize=True)
    np.testing.assert_allclose(v @ y.T, np.mean(scores, axis=0), atol=1e-5)
    assert not np.allclose(scores[0], scores[1])  # the members differ
    save_joint(model, tmp_path / "m.pt")
    back = load_joint(tmp_path / "m.pt")
    np.testing.assert_allclose(back.embed_sentences(split.trees, normalize=True), y, atol=1e-6)


def test_an_ensemble_needs_cyclic_snapshots():
    with pytest.raises(ValueError, match="snapshot ensemble needs"):
        TrainConfig(optimizer="adagrad", ensemble=True)
    with pytest.raises(ValueError, match="snapshot ensemble needs"):
        TrainConfig(optimizer="adam-cyclic", cycles=1, ensemble=True)


def test_a_student_learns_what_its_teacher_ranks(small):
    """A teacher that pairs each image's captions with another image: distilled, a student
    ranks by the teacher's pairing far better than one trained on the captions alone."""
    from groundsearch.model.training.teacher import Teacher

    split, parser_version = small
    n = len(split.features)
    moved = (split.caption_image + 1) % n  # the teacher's pairing: each caption's next image
    eye = np.eye(n, dtype=np.float16)
    teacher = Teacher(captions=eye[moved], images=eye)
    vocab = glove_vocabulary([t.words for t in split.trees])
    cfg = TrainConfig(
        epochs=6, batch_size=20, optimizer="adam-cyclic", normalize=True, margin=0.2,
        lr=0.01, cycles=2, seed=3,
    )  # fmt: skip
    by_teacher = Split(split.trees, split.features, moved)
    rsums = {}
    for weight in (0.0, 5.0):
        model = JointModel(JointConfig(encoder="bow"), vocab, None, parser_version, "lite0")
        taught = Split(split.trees, split.features, split.caption_image, teacher=teacher)
        train(model, taught, split, dataclasses.replace(cfg, distill=weight))
        rsums[weight] = evaluate(model, by_teacher, normalize=True)["rsum"]

    assert rsums[5.0] > rsums[0.0] + 50


def test_distillation_needs_a_teacher(small):
    split, parser_version = small
    vocab = glove_vocabulary([t.words for t in split.trees])
    model = JointModel(JointConfig(encoder="bow"), vocab, None, parser_version, "lite0")
    with pytest.raises(ValueError, match="needs a teacher"):
        train(model, split, split, TrainConfig(epochs=1, batch_size=20, distill=1.0))
    with pytest.raises(ValueError, match="distillation weight must be ≥ 0"):
        TrainConfig(distill=-1.0)
    with pytest.raises(ValueError, match="distill_temperature must be > 0"):
        TrainConfig(distill_temperature=0.0)


def test_a_fine_tune_no_epoch_of_which_beats_the_model_keeps_it_as_it_was(small):
    """Captions shuffled across photos teach nothing: judged on the true captions, every
    epoch is worse than the model it started from, which is kept as it was."""
    from groundsearch.model.training.loop import fine_tune

    split, parser_version = small
    vocab = glove_vocabulary([t.words for t in split.trees])
    config = JointConfig.from_dict({"encoder": "bow"})
    model = JointModel(config, vocab, build_inventory(config, split.trees), parser_version, "x")
    cfg = TrainConfig(epochs=8, batch_size=20, optimizer="adam-cyclic", normalize=True,
                      margin=0.2, lr=0.005, cycles=2)  # fmt: skip
    train(model, split, split, cfg)
    before = evaluate(model, split, normalize=True)["rsum"]
    state = {k: v.clone() for k, v in model.state_dict().items()}
    shuffled = Split(split.trees, split.features, np.roll(split.caption_image, 17))
    hist = fine_tune(model, shuffled, split, dataclasses.replace(cfg, epochs=3, lr=0.05))
    assert max(hist.dev_rsum) < before and hist.best_epoch == 0
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    assert evaluate(model, split, normalize=True)["rsum"] == pytest.approx(before)
