"""The concept channel on the shipped checkpoint: one inner product, two terms."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.checkpoints import CheckpointError, concept_config, load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.text import NoKnownWordError


@pytest.fixture(scope="module")
def models(parser):
    path = get_settings().default_checkpoint
    plain = load_checkpoint(path, parser=parser.version, concept_weight=0)
    open_vocab = load_checkpoint(path, parser=parser.version, concept_weight=0.5)
    assert load_checkpoint(path, parser=parser.version).concepts.config.weight == 1.0
    return plain, open_vocab


def test_the_channel_adds_weight_times_its_inner_product(models, parser, tmp_path):
    import skimage.data
    from PIL import Image

    plain, open_vocab = models
    assert plain.concepts is None and open_vocab.concepts is not None
    extractor = FeatureExtractor(plain.backbone, cache_dir=tmp_path)
    feats = extractor.embed_images([Image.fromarray(skimage.data.chelsea())])
    trees = parser.parse(["an armadillo", "a tabby cat sleeps"])
    v0, y0 = plain.embed_images(feats), plain.embed_sentences(trees)
    v1, y1 = open_vocab.embed_images(feats), open_vocab.embed_sentences(trees)
    assert v1.shape[1] == y1.shape[1] == v0.shape[1] + 50
    channel = open_vocab.concepts
    g, novelty = channel.sentence_parts(trees)
    extra = channel.image_vectors(feats) @ g.T
    np.testing.assert_allclose(v1 @ y1.T, (v0 @ y0.T) * (1 - novelty) + 0.5 * extra, atol=1e-5)
    # "armadillo" is no training word of either collection: the channel alone ranks for it; the
    # cat sentence's nouns were all trained: the joint space alone ranks for it
    assert novelty.tolist() == [1.0, 0.0]
    assert g[0].any() and not g[1].any()


def test_a_word_only_glove_knows_is_a_readable_query(models, parser):
    plain, open_vocab = models
    trees = parser.parse(["armadillo"])
    with pytest.raises(NoKnownWordError):
        plain.require_known_words(trees, "query")
    open_vocab.require_known_words(trees, "query")
    with pytest.raises(NoKnownWordError):
        open_vocab.require_known_words(parser.parse(["qwxzt"]), "query")


def test_a_bad_recorded_channel_is_a_checkpoint_error():
    with pytest.raises(CheckpointError, match="concept channel"):
        concept_config({"concepts": {"weight": 99}})
    with pytest.raises(CheckpointError, match="concept channel"):
        concept_config({"concepts": {"colour": "red"}})
    assert concept_config({"concepts": {"weight": 0.3}}, weight=0).weight == 0


def test_the_shipped_vectors_are_the_joint_spaces_then_the_channels(models):
    plain, open_vocab = models
    joint = plain.model.config.hidden * len(plain.model.members())
    assert open_vocab.embed_images(np.zeros((1, 1280), np.float32)).shape == (1, joint + 50)


def test_the_shipped_channel_speaks_everyday_words(models):
    assert models[1].concepts.config.names == "entry"


def test_record_concepts_changes_the_channel_and_nothing_else(tmp_path, parser):
    import torch

    from groundsearch.model.runtime.checkpoints import record_concepts

    path = get_settings().default_checkpoint
    out = tmp_path / "copy.pt"
    config = record_concepts(path, out, names="imagenet", halfway=5.0)
    assert (config.names, config.halfway, config.weight) == ("imagenet", 5.0, 1.0)
    before, after = (torch.load(p, weights_only=False) for p in (path, out))
    assert before["state_dict"].keys() == after["state_dict"].keys()
    assert all(torch.equal(before["state_dict"][k], after["state_dict"][k])
               for k in before["state_dict"])  # fmt: skip
    assert load_checkpoint(out, parser=parser.version).concepts.config.halfway == 5.0
    with pytest.raises(CheckpointError, match="names"):
        record_concepts(path, tmp_path / "bad.pt", names="wordnet")
    assert not (tmp_path / "bad.pt").exists()
