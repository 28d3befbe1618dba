"""Fitting the word tagger: labels from the photos' own caption nouns, written forms,
and a fit that ranks a noun's photos first."""

from __future__ import annotations

import numpy as np
from sklearn.metrics import roc_auc_score

from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.tagger import WordTagger
from groundsearch.model.training.corpus import text_trees
from groundsearch.model.training.tagger import (
    choose_words,
    fit_tagger,
    label_matrix,
    mean_average_precision,
    noun_share,
    photo_nouns,
    surface_forms,
    vocabulary,
)


def test_words_are_caption_nouns_written_as_captions_write_them(parser):
    trees = text_trees(parser)(
        [
            "Leaves fall on two dogs in the snow .",
            "A dog runs through the leaves .",
            "A dog jumps in mid air over the snow .",
        ]
    )
    nouns = [{n.lemma.lower() for n in t if n.upos == "NOUN"} for t in trees]
    assert {"dog", "snow"} <= nouns[0]
    assert vocabulary(nouns, 2)[0] == "dog" and "snow" in vocabulary(nouns, 2)
    leaf = next(
        n.lemma.lower() for t in trees for n in t if n.text.lower() == "leaves" and n.upos == "NOUN"
    )
    assert leaf != "leaves"  # "leaf" or "leave": written back as captions write it
    assert surface_forms(trees, ["dog", leaf]) == ["dog", "leaves"]
    assert noun_share(trees, ["dog", "runs"]) == [1.0, 0.0]
    lemmas, written = choose_words(nouns, trees, least=2)
    assert "dog" in lemmas and written[lemmas.index("dog")] == "dog"
    y = label_matrix(nouns, ["dog", "snow", "cat"])
    assert y[:, 0].all() and y[:, 1].tolist() == [1, 0, 1] and not y[:, 2].any()


def test_a_fitted_tagger_ranks_a_nouns_photos_first(tiny_flickr, parser, extractor):
    """Twelve real training photos: in-sample, every frequent noun's photos rank above
    the others', and the fitted tagger is a ``WordTagger`` with its lemmas."""
    ds = load_captioned_images(tiny_flickr, split="train")
    trees = text_trees(parser)(list(ds.captions))
    nouns = photo_nouns(ds, trees)
    lemmas, words = choose_words(nouns, trees, least=3)
    assert lemmas
    features = extractor.embed_files([ds.image_path(i) for i in range(len(ds.images))])
    y = label_matrix(nouns, lemmas)
    tagger = fit_tagger(features, y, words, extractor.identity, weight_decay=0.01, lemmas=lemmas)
    assert isinstance(tagger, WordTagger) and tagger.lemmas == tuple(lemmas)
    p = tagger.probabilities(features)
    for j in range(len(words)):
        if 0 < y[:, j].sum() < len(y):
            assert roc_auc_score(y[:, j], p[:, j]) > 0.95, words[j]
    assert mean_average_precision(tagger, features, y) > 0.9
    # a strong penalty leaves every word near its base rate: the fit is the data's
    flat = fit_tagger(features, y, words, extractor.identity, weight_decay=1e4)
    np.testing.assert_allclose(flat.probabilities(features).mean(0), y.mean(0), atol=0.05)
