"""The hubness correction: penalties, the re-ranking, its file and the shipped one."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.checkpoints import checkpoint_identity
from groundsearch.model.runtime.hubness import (
    FILE_NAME,
    Hubness,
    HubnessError,
    Penalty,
    bank_means,
    corrected_order,
    load_hubness,
)

ID = {"checkpoint_sha256": "ab" * 32}


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_a_penalty_is_the_weighted_mean_of_the_k_best_bank_scores():
    rng = np.random.default_rng(0)
    photos, bank = rng.normal(size=(700, 6)), rng.normal(size=(40, 6))  # two chunks
    best = np.sort(photos @ bank.T, axis=1)[:, -5:].mean(axis=1)
    assert np.allclose(bank_means(photos, bank, 5), best, atol=1e-5)
    assert np.allclose(bank_means(photos, bank, 99), (photos @ bank.T).mean(axis=1), atol=1e-5)
    hub = Hubness(Penalty(bank.astype(np.float32), 5, 0.5), None, ID)
    assert np.allclose(hub.photo_penalties(photos), 0.5 * best, atol=1e-5)
    assert hub.photo_penalties(photos[:1]).shape == (1,)
    assert hub.photo_penalties(photos[:0]).shape == (0,)
    assert not Penalty(bank, 5, 0.0)(photos).any()
    assert not hub.caption_penalties(photos[:3]).any()  # no captions' side: not corrected
    both = Hubness(Penalty(bank, 5, 0.5), Penalty(photos[:50], 3, 0.25), ID)
    captions = rng.normal(size=(4, 6))
    mine = 0.25 * np.sort(captions @ photos[:50].T, axis=1)[:, -3:].mean(axis=1)
    assert np.allclose(both.caption_penalties(captions), mine, atol=1e-5)


def test_a_hub_falls_below_the_photo_that_fits_the_query():
    rng = np.random.default_rng(1)
    shared = unit(rng.normal(size=8))
    captions = unit(rng.normal(size=(50, 8)) * 0.5 + shared)  # every caption leans one way
    own = unit(rng.normal(size=8))
    query = unit(own + 1.5 * shared)
    photos = np.stack([shared, own])  # photo 0: the hub
    scores = photos @ query
    assert scores[0] > scores[1]
    hub = Hubness(Penalty(captions, 10, 1.0), None, ID)
    ids, fixed = corrected_order(np.array([7, 9]), scores, hub.photo_penalties(photos))
    assert ids.tolist() == [9, 7] and fixed[0] >= fixed[1]
    assert np.allclose(sorted(fixed), sorted(scores - hub.photo_penalties(photos)))


def test_ties_keep_their_order_when_re_ranked():
    ids, fixed = corrected_order(np.array([3, 1, 2]), np.array([0.5, 0.5, 0.4]), np.zeros(3))
    assert ids.tolist() == [3, 1, 2] and fixed.tolist() == [0.5, 0.5, 0.4]


def test_the_file_round_trips_and_names_its_checkpoint(tmp_path):
    rng = np.random.default_rng(2)
    bank, photos = rng.normal(size=(30, 4)), rng.normal(size=(20, 4))
    hub = Hubness(Penalty(bank, 7, 0.8), Penalty(photos, 3, 0.6), ID, {"note": "x"})
    path = tmp_path / FILE_NAME
    hub.save(path)
    back = load_hubness(path, ID)
    assert (back.photos.k, back.photos.weight, dict(back.identity)) == (7, 0.8, ID)
    assert back.captions is not None and (back.captions.k, back.captions.weight) == (3, 0.6)
    assert back.info["note"] == "x"
    assert np.allclose(back.photos.bank, bank, atol=1e-2)  # float16 on disk
    assert np.allclose(back.captions.bank, photos, atol=1e-2)
    Hubness(Penalty(bank, 7, 0.8), None, ID).save(path)  # text → photo scores alone
    assert load_hubness(path).captions is None
    with pytest.raises(HubnessError, match="another checkpoint"):
        load_hubness(path, {"checkpoint_sha256": "cd" * 32})


@pytest.mark.parametrize("content", [b"", b"not an npz", None], ids=["empty", "garbage", "missing"])
def test_an_unusable_file_is_a_clear_error(tmp_path, content):
    path = tmp_path / FILE_NAME
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(HubnessError, match="cannot read hubness file"):
        load_hubness(path)


def test_inconsistent_settings_are_refused():
    with pytest.raises(HubnessError, match="non-empty"):
        Penalty(np.zeros((0, 4)), 5, 0.5)
    with pytest.raises(HubnessError, match="k must be"):
        Penalty(np.zeros((3, 4)), 0, 0.5)
    with pytest.raises(HubnessError, match="weight"):
        Penalty(np.zeros((3, 4)), 3, -1.0)


def test_the_shipped_file_fits_the_shipped_checkpoint_and_its_dimension():
    s = get_settings()
    hub = load_hubness(s.model_dir / FILE_NAME, checkpoint_identity(s.default_checkpoint))
    assert hub.captions is not None
    for side in (hub.photos, hub.captions):
        assert len(side.bank) == 10_000 and side.k >= 1 and 0.0 < side.weight <= 1.1
    from groundsearch.model.runtime.checkpoints import load_checkpoint

    model = load_checkpoint(s.default_checkpoint)
    features = np.zeros((1, model.model.config.image_dim), np.float32)
    assert hub.dim == model.embed_images(features).shape[1]
