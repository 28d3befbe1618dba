"""The open-vocabulary channel: ImageNet classes named in GloVe, beside the joint space."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from groundsearch.model.runtime.concepts import (
    ConceptChannel,
    ConceptConfig,
    class_words,
    content_words,
    glove_table,
    imagenet_classes,
)
from groundsearch.model.runtime.parsing.tree import build_tree


def tree(words: list[str], upos: list[str]):
    """A flat tree: the first noun (else the first word) is the root."""
    root = next((i for i, u in enumerate(upos) if u == "NOUN"), 0)
    heads = [0 if i == root else root + 1 for i in range(len(words))]
    rels = ["root" if i == root else "dep" for i in range(len(words))]
    n = len(words)
    return build_tree(" ".join(words), words, [w.lower() for w in words], upos, ["_"] * n,
                      ["_"] * n, heads, rels)  # fmt: skip


@pytest.fixture(scope="module")
def channel(extractor):
    return ConceptChannel(
        extractor.spec.name, ConceptConfig(weight=0.5, top=10, rare=5), {"dog": 40, "man": 3}
    )


def test_class_names_come_in_the_classifier_order():
    classes = imagenet_classes()
    assert len(classes) == 1000
    assert classes[340] == "zebra" and classes[937] == "broccoli"
    assert class_words("German shepherd") == ["german", "shepherd"]


def test_a_cat_photo_lands_near_the_word_cat(channel, extractor):
    import skimage.data

    feats = extractor.embed_images([Image.fromarray(skimage.data.chelsea())])
    top = [channel.classes[i] for i in np.argsort(-channel.class_probabilities(feats)[0])[:3]]
    assert any("cat" in name or name == "tabby" for name in top)
    v = channel.image_vectors(feats)[0]
    # a unit ConSE vector less what every photo's shares (the mean class-name vector)
    assert np.linalg.norm(v + channel.class_mean) == pytest.approx(1.0, abs=1e-5)
    index, unit = glove_table()
    sims = {w: float(unit[index[w]] @ v) for w in ("cat", "car", "pizza", "guitar")}
    assert max(sims, key=sims.get) == "cat"


def test_only_untrained_nouns_speak(channel):
    index, unit = glove_table()
    zebra = channel.sentence_vectors([tree(["a", "zebra"], ["DET", "NOUN"])])[0]
    assert np.allclose(zebra, unit[index["zebra"]], atol=1e-6)
    # "dog" was trained (40 captions ≥ rare): a familiar word is silent at familiar=0
    dog = channel.sentence_vectors([tree(["a", "dog"], ["DET", "NOUN"])])[0]
    assert not dog.any()
    both = channel.sentence_vectors([tree(["a", "dog", "and", "a", "zebra"],
                                          ["DET", "NOUN", "CCONJ", "DET", "NOUN"])])[0]  # fmt: skip
    assert np.allclose(both, unit[index["zebra"]] / 2, atol=1e-6)
    # "man" was seen 3 times, fewer than rare=5: it counts as untrained
    assert channel.novelty("man") == 1.0 and channel.novelty("dog") == 0.0


def test_a_text_without_nouns_uses_its_content_words(channel):
    t = tree(["broccoli", "!"], ["X", "PUNCT"])
    assert content_words(t) == ["broccoli"]
    assert channel.sentence_vectors([t]).any()
    assert not channel.sentence_vectors([tree(["the", "."], ["DET", "PUNCT"])]).any()


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="weight"):
        ConceptConfig(weight=-1)
    with pytest.raises(ValueError, match="top-k"):
        ConceptConfig(top=0)
    with pytest.raises(ValueError, match="familiar"):
        ConceptConfig(familiar=2)
    with pytest.raises(ValueError, match="halfway"):
        ConceptConfig(halfway=-1)
    with pytest.raises(ValueError, match="names"):
        ConceptConfig(names="wordnet")


def test_with_halfway_a_word_fades_with_its_training_count(extractor):
    counts = {"dog": 400, "cow": 5, "yak": 0}
    fading = ConceptChannel(extractor.spec.name, ConceptConfig(weight=1, halfway=5), counts)
    assert fading.novelty("zebra") == fading.novelty("yak") == 1.0  # never trained
    assert fading.novelty("cow") == pytest.approx(0.5)  # seen `halfway` times
    assert fading.novelty("dog") == pytest.approx(1 / (1 + 80**2))  # nearly silent
    assert fading.novelty("COW") == fading.novelty("cow")
    floor = ConceptChannel(
        extractor.spec.name, ConceptConfig(weight=1, halfway=5, familiar=0.2), counts
    )
    assert floor.novelty("cow") == pytest.approx(0.2 + 0.8 * 0.5)
    assert floor.novelty("dog") > 0.2


def test_entry_level_names_bring_the_everyday_word_to_the_photo(extractor):
    import skimage.data

    feats = extractor.embed_images([Image.fromarray(skimage.data.chelsea())])
    index, unit = glove_table()
    cat = unit[index["cat"]]
    by_name = {
        names: ConceptChannel(extractor.spec.name, ConceptConfig(weight=1, names=names))
        for names in ("imagenet", "entry", "both")
    }
    for names, ch in by_name.items():
        v = ch.image_vectors(feats)[0]
        sims = {w: float(unit[index[w]] @ v) for w in ("cat", "dog", "car", "bird", "pizza")}
        assert max(sims, key=sims.get) == "cat", (names, sims)
    entry = by_name["entry"]
    assert np.allclose(entry.class_vectors[281], cat, atol=1e-6)  # tabby: "cat" to people
    assert np.allclose(by_name["imagenet"].class_vectors[281], unit[index["tabby"]], atol=1e-6)


def test_the_tagger_share_brings_snow_to_a_snowy_photo(tmp_path):
    """Snow is no ImageNet class: with the word tagger's share, a Flickr8k test photo
    whose captions say snow moves towards the word; the nouns an ImageNet class is
    called by ("dog") are left to the classifier; a share outside [0, 1] is refused."""
    from groundsearch.common.settings import get_settings
    from groundsearch.model.data import load_captioned_images
    from groundsearch.model.data.held_out_concepts import words_of
    from groundsearch.model.runtime.images.features import FeatureExtractor

    s = get_settings()
    ds = load_captioned_images(s.flickr8k_dir, split="test")
    snowy = next(
        i for i in range(len(ds.images)) if all("snow" in words_of(c) for c in ds.captions_of(i))
    )
    extractor = FeatureExtractor.for_identity("efficientnet-lite2", cache_dir=tmp_path)
    feats = extractor.embed_files([ds.image_path(snowy)])
    index, unit = glove_table()
    snow = unit[index["snow"]]
    plain = ConceptChannel("efficientnet-lite2", ConceptConfig(weight=1, names="entry"))
    mixed = ConceptChannel("efficientnet-lite2", ConceptConfig(weight=1, names="entry", tagger=0.2))
    assert float(mixed.image_vectors(feats)[0] @ snow) > float(plain.image_vectors(feats)[0] @ snow)
    words = dict(zip(mixed.tagger.words, mixed.tag_mask, strict=True))
    assert words["snow"] == 1 and words["dog"] == 0 and words["man"] == 1
    with pytest.raises(ValueError, match="tagger's share"):
        ConceptConfig(weight=1, tagger=1.5)
