"""Training options of the seed papers: Socher et al.'s squared loss, Merkx & Frank's
cyclic learning rate between two bounds and their ensemble of the two best snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.model.runtime.joint import JointConfig, JointModel
from groundsearch.model.training.loop import History, Split, TrainConfig, _best_snapshots, train
from tests.paper_trees import bikes_ride, students, toy_vocab


def tiny_split() -> Split:
    trees = [students(), bikes_ride()] * 4
    feats = np.random.default_rng(0).normal(size=(2, 6)).astype(np.float32)
    return Split(trees, feats, np.array([0, 1] * 4))


def bow() -> JointModel:
    return JointModel(
        JointConfig(encoder="bow", hidden=4, image_dim=6), toy_vocab(), None, "p", "c"
    )


def test_cyclic_rate_stays_between_its_bounds_and_best_snapshots_are_kept():
    cfg = TrainConfig(
        epochs=6, batch_size=4, optimizer="adam-cyclic", lr=1e-3, lr_min=1e-6, cycles=3,
        ensemble=True, ensemble_best=2, normalize=True, margin=0.2,
    )  # fmt: skip
    model = bow()
    hist = train(model, tiny_split(), tiny_split(), cfg)
    assert len(hist.snapshots) == 3 and len(hist.snapshot_dev_rsum) == 3
    assert all(1e-6 <= lr <= 1e-3 for lr in hist.lr)
    # 8 captions / 4 = 2 steps an epoch, 4 a cycle: a cycle's last step has phase 3/4
    last = 1e-6 + 0.5 * (1e-3 - 1e-6) * (1 + np.cos(0.75 * np.pi))
    assert hist.lr[1] == pytest.approx(last) and hist.lr[3] == pytest.approx(last)
    assert len(model.snapshots) in (0, 2)


def test_best_snapshots_are_the_highest_dev_rsum_in_training_order():
    hist = History(snapshots=[{"k": i} for i in range(4)], snapshot_dev_rsum=[5, 9, 1, 7])
    assert _best_snapshots(hist, 2) == [{"k": 1}, {"k": 3}]
    assert _best_snapshots(hist, 0) == hist.snapshots


def test_squared_loss_trains():
    cfg = TrainConfig(epochs=3, batch_size=4, loss="squared", optimizer="adam-cyclic", lr=0.01)
    hist = train(bow(), tiny_split(), tiny_split(), cfg)
    assert hist.loss[-1] < hist.loss[0]


def test_contrastive_loss_trains():
    cfg = TrainConfig(
        epochs=3, batch_size=4, loss="contrastive", temperature=0.1, normalize=True,
        optimizer="adam-cyclic", lr=0.01,
    )  # fmt: skip
    hist = train(bow(), tiny_split(), tiny_split(), cfg)
    assert hist.loss[-1] < hist.loss[0]


def test_bad_schedule_options_are_named():
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        TrainConfig(loss="hinge")
    with pytest.raises(ValueError, match="temperature must be > 0"):
        TrainConfig(loss="contrastive", temperature=0.0)
    with pytest.raises(ValueError, match="lr_min"):
        TrainConfig(lr=1e-3, lr_min=1e-2)
    with pytest.raises(ValueError, match="needs --ensemble"):
        TrainConfig(ensemble_best=2)
    with pytest.raises(ValueError, match="no ensemble"):
        TrainConfig(optimizer="adam-cyclic", ensemble=True, ensemble_best=1)
