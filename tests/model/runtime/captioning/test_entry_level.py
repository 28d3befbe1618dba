"""The shipped entry-level table: a row for every ImageNet class, words GloVe knows, the
everyday noun for the classes people name, and the reviewed rows the script keeps."""

from __future__ import annotations

import pytest

from groundsearch.model.runtime.captioning.entry_level import EntryLevel, default_path
from groundsearch.model.runtime.concepts import glove_table, imagenet_classes


@pytest.fixture(scope="module")
def table() -> EntryLevel:
    return EntryLevel.load()


def test_every_class_has_a_row_in_the_classifiers_order(table):
    assert len(table) == 1000
    assert list(table.classes) == imagenet_classes()


def test_every_named_word_is_one_glove_knows(table):
    index = glove_table()[0]
    unknown = [w for w in table.vocabulary if w not in index]
    assert unknown == []
    assert 300 < len(table.vocabulary) < 1000  # families share words
    assert 20 < table.words.count("") < 150  # and some classes are never named


@pytest.mark.parametrize(
    ("name", "word"),
    [
        ("laptop", "laptop"),
        ("notebook", "laptop"),
        ("cheeseburger", "burger"),
        ("bagel", "bagel"),
        ("school bus", "bus"),
        ("ox", "cow"),
        ("trifle", "cake"),
        ("golden retriever", "dog"),
        ("Afghan hound", "dog"),
        ("goldfinch", "bird"),
        ("tabby", "cat"),
        ("tiger", "tiger"),
        ("king penguin", "penguin"),
        ("sports car", "car"),
        ("mountain bike", "bike"),
        ("acoustic guitar", "guitar"),
        ("canoe", "canoe"),
        ("pizza", "pizza"),
        ("Granny Smith", "apple"),
        ("passenger car", "train"),  # a railway carriage, not a car
        ("assault rifle", ""),  # weapons are never named
        ("prison", ""),
        ("brassiere", ""),
        ("web site", ""),
    ],
)
def test_spot_checks(table, name, word):
    assert table.word(table.classes.index(name)) == word


def test_every_non_obvious_choice_gives_a_reason(table):
    for cls, word, reason in zip(table.classes, table.words, table.reasons, strict=True):
        if word not in cls.lower().replace("-", " ").split():
            assert reason, cls  # why this word, or why never named


def test_a_malformed_table_is_refused(tmp_path):
    bad = tmp_path / "t.tsv"
    text = default_path().read_text()
    bad.write_text(text.replace("\tlaptop\tname", "\tlap top\tname"))
    with pytest.raises(ValueError, match="one lower-case word"):
        EntryLevel.load(bad)
    lines = [line for line in text.splitlines(keepends=True) if not line.startswith("7\t")]
    bad.write_text("".join(lines))
    with pytest.raises(ValueError, match="in order"):
        EntryLevel.load(bad)


def test_the_script_keeps_the_reviewed_rows(tmp_path):
    from tests.bench import load_script

    script = load_script("entry_level")
    WordNet, propose, write = script.WordNet, script.propose, script.write

    out = tmp_path / "entry_level.tsv"
    out.write_text(default_path().read_text())
    classes = imagenet_classes()
    index = glove_table()[0]
    proposed = propose(classes, WordNet.from_meteor(), index)
    assert sum(1 for p in proposed if p[0]) > 990  # WordNet synsets recovered
    assert proposed[classes.index("laptop")][0] == "n03642806"  # ImageNet's wnid
    write(out, classes, proposed)
    assert out.read_text() == default_path().read_text()  # the shipped table, reproduced
