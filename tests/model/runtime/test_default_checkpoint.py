"""The shipped SDT-RNN: loads against the shipped parser and ranks real photos sensibly."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.checkpoints import load_checkpoint, load_joint
from groundsearch.model.runtime.images.features import FeatureExtractor


@pytest.fixture(scope="module")
def shipped(parser):
    return load_joint(get_settings().default_checkpoint, parser=parser.version)


def test_the_default_is_an_sdt_rnn_taught_by_an_ensemble(shipped):
    assert shipped.config.encoder == "sdt-rnn"
    assert shipped.backbone == "efficientnet-lite2"
    assert len(shipped.extra["teachers"]) == 3 and shipped.extra["train"]["distill"] > 0
    assert shipped.extra["dev"]["rsum"] >= 255  # the mean of Flickr8k's and cc-web's dev


def test_an_old_flat_config_reads_into_the_sdt_rnns_options():
    from groundsearch.model.runtime.encoders.registry import TreeRNNOptions
    from groundsearch.model.runtime.joint import JointConfig

    # the config of the SDT-RNN shipped until issue 40, saved before options were per
    # encoder (rnn_hidden is the recurrent encoders') and before the DT-RNN options
    # existed (they take their defaults)
    stored = {"encoder": "sdt-rnn", "hidden": 64, "rnn_hidden": 512, "image_dim": 1280,
              "freeze_words": False, "relation_min_count": 100, "sqrt_features": True,
              "init_noise": 0.01, "seed": 0}  # fmt: skip
    read = JointConfig.from_dict(stored)
    assert read.options == TreeRNNOptions(
        freeze_words=False, init_noise=0.01, relation_min_count=100
    )
    config = read.to_dict()
    assert {k: config[k] for k in stored if k in config} == {
        k: v for k, v in stored.items() if k != "rnn_hidden"
    }


def test_the_default_matches_test_photos_with_their_captions(parser, shipped, tmp_path):
    ds = load_captioned_images(get_settings().data_dir / "flickr8k", split="test")
    n = 8
    files = [ds.image_path(i) for i in range(n)]
    captions = [c for c, i in zip(ds.captions, ds.caption_image, strict=True) if i < n]
    links = np.array([i for i in ds.caption_image if i < n])
    model = load_checkpoint(get_settings().default_checkpoint, parser=parser.version)
    feats = FeatureExtractor(shipped.backbone, cache_dir=tmp_path).embed_files(files)
    scores = model.embed_images(feats) @ model.embed_sentences(parser.parse(captions)).T
    # each caption's own photo is in its top 3 of 8 far more often than chance (3/8)
    rank = (scores > scores[links, np.arange(len(links))]).sum(axis=0)
    assert (rank < 3).mean() > 0.6


def test_the_stacked_ensemble_equals_its_members_one_by_one(parser, shipped):
    """Queries are embedded by all snapshots at once (batched products); the result is the
    members' vectors computed one model at a time, normalised and concatenated."""
    import copy

    import torch

    model = copy.deepcopy(shipped)  # three snapshots: its own weights and two moved ones
    state = model.state_dict()
    torch.manual_seed(0)
    model.snapshots = [state] + [
        {
            k: v + 0.01 * torch.randn_like(v) if v.is_floating_point() else v
            for k, v in state.items()
        }
        for _ in range(2)
    ]
    trees = parser.parse(["A black dog runs on the beach .", "Two girls sit on a bench ."])
    with torch.no_grad():
        parts = [member.encode_sentences(trees) for member in model.members()]
    one_by_one = model._combine(parts, normalize=True)
    np.testing.assert_allclose(model.embed_sentences(trees, True), one_by_one, atol=1e-6)
    np.testing.assert_allclose(model.embed_sentences(trees[1:], True), one_by_one[1:], atol=1e-6)
