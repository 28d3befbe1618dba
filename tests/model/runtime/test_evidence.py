"""Evidence: the shipped noun → classes table, a photo's top classes, and what the
backbone's classifier says about a query's nouns on real photos."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.model.runtime.captioning.entry_level import EntryLevel
from groundsearch.model.runtime.concepts import ConceptChannel, ConceptConfig, imagenet_classes
from groundsearch.model.runtime.evidence import (
    TOP_CLASSES,
    NounClasses,
    default_path,
    shipped,
    top_classes,
)
from groundsearch.model.runtime.images.features import FeatureExtractor
from tests.tiny_data import FLICKR


@pytest.fixture(scope="module")
def table() -> NounClasses:
    return NounClasses.load()


def _classes(table: NounClasses, noun: str) -> set[str]:
    names = imagenet_classes()
    return {names[c] for c in table.classes[noun]}


def test_the_shipped_table_names_things_in_lower_case_words(table):
    assert default_path().stat().st_size < 200_000
    assert 500 < len(table) < 5000
    assert all(n.isalpha() and n == n.lower() for n in table.classes)
    assert shipped() is shipped()
    assert shipped().classes == table.classes


def test_every_entry_level_word_has_its_classes(table):
    entry = EntryLevel.load()
    for c, word in enumerate(entry.words):
        if word:
            assert c in table.classes[word], (c, word)


@pytest.mark.parametrize(
    ("noun", "present", "absent"),
    [
        ("bird", {"goldfinch", "goose", "hen", "king penguin"}, {"airliner"}),
        ("dog", {"golden retriever", "Afghan hound", "pug"}, {"tabby", "timber wolf"}),
        ("cat", {"tabby", "Siamese cat", "Persian cat"}, {"golden retriever"}),
        # the automobile, its first sense: not the railway car
        ("car", {"sports car", "convertible", "jeep", "limousine"}, {"passenger car"}),
        ("boat", {"canoe", "speedboat", "lifeboat"}, {"airliner"}),
        ("guitar", {"acoustic guitar", "electric guitar"}, {"violin"}),
        ("horse", {"sorrel"}, {"ox"}),
        ("cow", {"ox"}, {"sorrel"}),
        ("vehicle", {"sports car", "canoe", "mountain bike"}, {"tabby"}),
        ("beach", {"seashore", "sandbar"}, {"alp"}),
    ],
)
def test_spot_checks(table, noun, present, absent):
    have = _classes(table, noun)
    assert present <= have, present - have
    assert not absent & have


@pytest.mark.parametrize(
    "noun",
    # too general, people (the classifier's few person classes cover no man), or no class
    [
        "object",
        "whole",
        "instrumentality",
        "artifact",
        "animal",
        "device",
        "container",
        "man",
        "person",
        "woman",
        "snow",
        "water",
        "giraffe",
    ],
)
def test_nouns_without_classes(table, noun):
    assert noun not in table.classes


def test_top_classes_are_each_photos_best_first():
    p = np.array([[0.1, 0.5, 0.2, 0.2], [0.7, 0.1, 0.1, 0.1]])
    ids, probs = top_classes(p, 3)
    assert ids.tolist() == [[1, 2, 3], [0, 1, 2]]  # ties by class
    np.testing.assert_allclose(probs, [[0.5, 0.2, 0.2], [0.7, 0.1, 0.1]])
    assert top_classes(np.full((2, 5), 0.2))[0].shape == (2, 5)  # fewer than k classes


def test_evidence_is_the_best_nouns_probability_on_its_classes():
    table = NounClasses({"dog": frozenset({1, 2}), "ball": frozenset({3})})
    ids = np.array([[1, 2, 3], [3, 0, -1], [0, 4, 5]])
    probs = np.array([[0.5, 0.3, 0.1], [0.6, 0.2, 0.0], [0.9, 0.05, 0.05]])
    np.testing.assert_allclose(table.evidence(["dog"], ids, probs), [0.8, 0.0, 0.0])
    np.testing.assert_allclose(table.evidence(["Dog", "ball"], ids, probs), [0.8, 0.6, 0.0])
    assert table.evidence(["man", "snow"], ids, probs) is None  # no nameable noun
    assert table.evidence([], ids, probs) is None
    with pytest.raises(ValueError, match="hits × k"):
        table.evidence(["dog"], ids, probs[:, :2])


def test_a_querys_nameable_nouns(table, parser):
    trees = parser.parse(
        ["a man riding a horse", "Two dogs play with a ball on the beach .", "snow", "a bird"]
    )
    assert table.nouns(trees[0]) == ["horse"]  # "man" has no class
    assert table.nouns(trees[1]) == ["dog", "ball", "beach"]  # lemmas
    assert table.nouns(trees[2]) == []
    assert table.nouns(trees[3]) == ["bird"]


def test_a_malformed_table_is_refused(tmp_path):
    path = tmp_path / "n.tsv"
    path.write_text("noun\tclasses\nbird\t10 x\n")
    with pytest.raises(ValueError, match="not integers"):
        NounClasses.load(path)
    path.write_text("noun\tclasses\nbird\t10 1000\n")
    with pytest.raises(ValueError, match="not one of 1000"):
        NounClasses.load(path)
    path.write_text("noun\tclasses\nSports car\t10\n")
    with pytest.raises(ValueError, match="lower-case word"):
        NounClasses.load(path)
    path.write_text("word\tids\nbird\t10\n")
    with pytest.raises(ValueError, match="columns"):
        NounClasses.load(path)
    path.write_text("# a comment\nnoun\tclasses\thow\nbird\t10 11\tentry 2\n")
    assert NounClasses.load(path).classes == {"bird": frozenset({10, 11})}


def test_on_real_photos_the_classifier_sees_the_dogs_their_captions_name(table, tmp_path):
    """The first 30 Flickr8k test photos: those all five of whose captions say dog have
    more dog evidence than those none of whose captions does."""
    names = (FLICKR / "Flickr_8k.testImages.txt").read_text().split()[:30]
    said: dict[str, int] = dict.fromkeys(names, 0)
    for line in (FLICKR / "Flickr8k.token.txt").read_text().splitlines():
        name, text = line.split("#", 1)[0], line.split("\t", 1)[1].lower().split()
        if name in said and ("dog" in text or "dogs" in text):
            said[name] += 1
    channel = ConceptChannel("efficientnet-lite2", ConceptConfig())
    extractor = FeatureExtractor("efficientnet-lite2", cache_dir=tmp_path)
    ids, probs = top_classes(
        channel.class_probabilities(extractor.embed_files([FLICKR / "Images" / n for n in names]))
    )
    assert ids.shape == probs.shape == (30, TOP_CLASSES)
    evidence = table.evidence(["dog"], ids, probs)
    assert evidence is not None
    dogs = np.array([said[n] == 5 for n in names])
    none = np.array([said[n] == 0 for n in names])
    assert dogs.sum() >= 3 and none.sum() >= 10
    assert np.median(evidence[dogs]) > 0.5
    assert evidence[none].max() < 0.2
    assert evidence[dogs].min() > np.median(evidence[none])
