"""Which captions mention a concept, and training sets with a concept's photos removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundsearch.model.data import DatasetError
from groundsearch.model.data.flickr import CaptionedImages
from groundsearch.model.data.held_out_concepts import (
    HELD_OUT,
    HYPONYMS,
    mentions,
    photos_mentioning,
    resolve,
    with_kinds,
    without_concepts,
)

DS = CaptionedImages(
    Path("."),
    ("a.jpg", "b.jpg", "c.jpg"),
    (
        "A cat sleeps on a bed .",
        "A dog on the grass .",
        "A cathedral at night .",
        "Two kittens and a dog .",
        "A man rides his bike in the snow .",
    ),
    (0, 1, 2, 1, 2),
)


def test_mentions_are_whole_words_of_the_listed_forms():
    assert mentions("A cat sleeps", HELD_OUT["cat"])
    assert mentions("Two KITTENS play", HELD_OUT["cat"])
    assert not mentions("A cathedral at night", HELD_OUT["cat"])
    assert not mentions("A catamaran", HELD_OUT["boat"])


def test_photos_mentioning_needs_every_group_in_one_caption():
    assert photos_mentioning(DS, HELD_OUT["cat"]) == {0, 1}
    assert photos_mentioning(DS, HELD_OUT["cat"], ("dog",)) == {1}
    assert photos_mentioning(DS, HELD_OUT["bicycle"], HELD_OUT["snow"]) == {2}
    assert photos_mentioning(DS, ("zebra",)) == set()


def test_without_concepts_drops_whole_photos_and_renumbers():
    kept = without_concepts(DS, resolve(["cat"]))
    assert kept.images == ("c.jpg",)
    assert kept.captions == ("A cathedral at night .", "A man rides his bike in the snow .")
    assert kept.caption_image == (0, 0)
    with pytest.raises(DatasetError, match="no training photo"):
        without_concepts(DS, resolve(["cat", "snow"]))


def test_resolve_takes_the_documented_forms_or_the_word_itself():
    assert resolve(["Horse", "zebra"]) == {"horse": HELD_OUT["horse"], "zebra": ("zebra",)}
    with pytest.raises(DatasetError, match="one word"):
        resolve(["c@t"])
    with pytest.raises(DatasetError, match="no concept"):
        resolve([" ", ""])


def test_kinds_extend_the_forms_and_count_as_mentions():
    both = with_kinds({"car": HELD_OUT["car"], "zebra": ("zebra",)})
    assert both["car"][: len(HELD_OUT["car"])] == HELD_OUT["car"]
    assert "jeep" in both["car"] and both["zebra"] == ("zebra",)
    assert mentions("A blue jeep in a stream", both["car"])
    assert not mentions("A blue jeep in a stream", HELD_OUT["car"])
    assert mentions("A person on a motorcyle does a stunt", with_kinds(HELD_OUT)["motorcycle"])


def test_kinds_are_new_words_of_known_concepts_and_no_other_concepts_form():
    every_form = {f for forms in HELD_OUT.values() for f in forms}
    assert set(HYPONYMS) == set(HELD_OUT)
    for name, kinds in HYPONYMS.items():
        assert len(set(kinds)) == len(kinds), name
        assert not set(kinds) & every_form, name
        others = {k for other, ks in HYPONYMS.items() if other != name for k in ks}
        assert not set(kinds) & others, name
