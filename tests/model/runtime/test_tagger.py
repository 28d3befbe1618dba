"""The word tagger: Flickr8k's caption nouns read from a photo's CNN features, stored
without pickle, refused for another backbone."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.data.held_out_concepts import words_of
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.tagger import TaggerError, WordTagger, default_path


def small(words=("snow", "bike", "leaves"), dim=4) -> WordTagger:
    rng = np.random.default_rng(0)
    return WordTagger(
        tuple(words),
        "efficientnet-lite2",
        np.zeros(dim, np.float32),
        np.ones(dim, np.float32),
        rng.normal(size=(len(words), dim)).astype(np.float32),
        np.zeros(len(words), np.float32),
        ("snow", "bike", "leaf"),
    )


def test_a_tagger_round_trips_and_answers_probabilities(tmp_path):
    tagger = small()
    tagger.save(tmp_path / "t.npz")
    back = WordTagger.load(tmp_path / "t.npz", backbone="efficientnet-lite2")
    assert back.words == tagger.words and back.lemmas == ("snow", "bike", "leaf")
    z = np.eye(4, dtype=np.float32)
    p = back.probabilities(z)
    assert p.shape == (4, 3) and np.all((p > 0) & (p < 1))
    np.testing.assert_allclose(p, tagger.probabilities(z), rtol=1e-3)  # float16 weights
    with np.load(tmp_path / "t.npz") as f:
        assert f["weight"].dtype == np.float16 and f["mean"].dtype == np.float32
    assert back.weight.dtype == np.float32
    assert back.lemma_column("leaf") == 2 and back.column("leaves") == 2
    assert back.column("cat") is None
    np.testing.assert_allclose(back.of(["bike", "cat"], z)[:, 0], p[:, 1])
    assert not back.of(["bike", "cat"], z)[:, 1].any()
    sub = back.subset(["leaves"])
    assert sub.lemmas == ("leaf",)
    np.testing.assert_allclose(sub.probabilities(z)[:, 0], p[:, 2])


def test_bad_taggers_and_inputs_are_refused(tmp_path):
    tagger = small()
    tagger.save(tmp_path / "t.npz")
    with pytest.raises(TaggerError, match="reads efficientnet-lite2 features"):
        WordTagger.load(tmp_path / "t.npz", backbone="efficientnet-lite0")
    with pytest.raises(TaggerError, match="no word tagger"):
        WordTagger.load(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(TaggerError, match="not a word tagger"):
        WordTagger.load(tmp_path / "junk.npz")
    with pytest.raises(TaggerError, match="features must be n × 4"):
        tagger.probabilities(np.zeros((2, 5), np.float32))
    with pytest.raises(TaggerError, match="weight"):
        WordTagger(("a",), "x", np.zeros(4), np.ones(4), np.zeros((2, 4)), np.zeros(2))
    with pytest.raises(TaggerError, match="twice"):
        WordTagger(("a", "a"), "x", np.zeros(4), np.ones(4), np.zeros((2, 4)), np.zeros(2))
    with pytest.raises(TaggerError, match="positive"):
        WordTagger(("a",), "x", np.zeros(4), np.zeros(4), np.zeros((1, 4)), np.zeros(1))


def test_the_shipped_tagger_sees_dogs_and_snow_on_flickr8k_test_photos(parser, tmp_path):
    """Twenty test photos: the photos whose captions name a dog (or snow) get a higher
    probability of it than the others, for words ImageNet has no class for too."""
    s = get_settings()
    tagger = WordTagger.load()
    model = load_checkpoint(s.default_checkpoint, parser=parser.version)
    assert tagger.backbone == model.backbone
    assert default_path().stat().st_size < 8e6  # 1,582 nouns of both collections
    for w in ("snow", "bike", "horse", "motorcycle", "beach", "cat"):
        assert tagger.lemma_column(w) is not None, w
    ds = load_captioned_images(s.flickr8k_dir, split="test")
    photos = range(20)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=tmp_path)
    p = tagger.of(["dog", "snow"], extractor.embed_files([ds.image_path(i) for i in photos]))
    for k, word in enumerate(("dog", "snow")):
        named = np.array([any(word in words_of(c) for c in ds.captions_of(i)) for i in photos])
        assert named.any() and not named.all(), word
        assert p[named, k].mean() > p[~named, k].mean() + 0.3, word


def test_some_columns_only_are_the_same_probabilities():
    tagger = small()
    z = np.random.default_rng(1).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_allclose(tagger.probabilities(z, [2, 0]), tagger.probabilities(z)[:, [2, 0]])
