"""Noun phrases as extra positives: each noun with its determiner, adjectives and
compounds as a tree of its own, drawn at the rate asked, and no negative for a photo
whose captions use its noun."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from groundsearch.model.runtime.parsing.tree import build_tree
from groundsearch.model.training.loop import TrainConfig
from groundsearch.model.training.losses import ranking_loss
from groundsearch.model.training.phrases import fitting, noun_phrases, photo_nouns, with_phrases
from tests.paper_trees import students


def black_dog():
    words = ["A", "black", "dog", "runs", "on", "the", "grass", "."]
    return build_tree(
        "A black dog runs on the grass .",
        words,
        ["a", "black", "dog", "run", "on", "the", "grass", "."],
        ["DET", "ADJ", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"],
        ["_"] * 8,
        ["_"] * 8,
        [3, 3, 4, 0, 7, 7, 4, 4],
        ["det", "amod", "nsubj", "root", "case", "det", "obl", "punct"],
    )


def test_each_noun_with_its_modifiers_becomes_a_tree_of_its_own():
    phrases = noun_phrases(black_dog())
    assert [(p.text, noun) for p, noun in phrases] == [
        ("A black dog", "dog"),
        ("the grass", "grass"),
    ]
    dog = phrases[0][0]
    assert dog.root.text == "dog" and [n.head for n in dog] == [3, 3, 0]
    assert [n.deprel for n in dog] == ["det", "amod", "root"] and dog.root.size == 3
    assert [p.text for p, _ in noun_phrases(students())] == ["Students", "bikes", "night"]
    alone = build_tree("dogs", ["dogs"], ["dog"], ["NOUN"], ["_"], ["_"], [0], ["root"])
    assert noun_phrases(alone) == []  # the whole caption already


def test_phrases_join_the_split_at_the_rate_asked():
    trees = [black_dog(), students()]
    links = np.array([0, 1])
    new, images, rates, nouns = with_phrases(trees, links, np.array([1.0, 2.0]), 0.5)
    assert len(new) == 2 + 2 + 3 and images.tolist() == [0, 1, 0, 0, 1, 1, 1]
    assert rates.tolist() == pytest.approx([1.0, 2.0, 0.25, 0.25, 1 / 3, 1 / 3, 1 / 3])
    assert nouns.tolist() == ["", "", "dog", "grass", "students", "bikes", "night"]  # lemmas
    photos = photo_nouns(trees, links)
    assert photos == [frozenset({"dog", "grass"}), frozenset({"students", "bikes", "night"})]
    fits = fitting(nouns[[0, 2, 6]], np.array([0, 1, 1]), photos)
    # "A black dog" (c = 1) fits photo 0 only; "night" (c = 2) fits photo 1
    assert fits.tolist() == [[False, True, False], [False, False, True], [False, False, True]]


def test_a_fitting_pair_is_no_negative():
    images = torch.eye(3)
    sentences = torch.tensor([[1.0, 0, 0], [0.9, 0.1, 0], [0, 0, 1.0]])
    ids = torch.arange(3)
    plain = ranking_loss(images, sentences, 0.5, image_ids=ids)
    fits = torch.zeros(3, 3, dtype=torch.bool)
    fits[0, 1] = True  # sentence 1 fits photo 0 too: not its negative
    eased = ranking_loss(images, sentences, 0.5, image_ids=ids, fitting=fits)
    assert eased < plain
    fits[:] = False
    assert ranking_loss(images, sentences, 0.5, image_ids=ids, fitting=fits) == plain


def test_a_phrase_rate_that_cannot_be_used_is_named():
    with pytest.raises(ValueError, match="--phrases must be ≥ 0"):
        TrainConfig(phrases=-0.5)
    with pytest.raises(ValueError, match="do not go together"):
        TrainConfig(phrases=0.5, distill=1.0)
    assert TrainConfig(phrases=0.5).phrases == 0.5
