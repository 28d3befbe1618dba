"""bench/everyday_words.py --judged: photos judged by eye join a word's relevant photos."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from groundsearch.model.training.evaluation.short_queries import ShortQuery
from tests.bench import load_script
from tests.tiny_data import FLICKR

JUDGED = Path(__file__).parents[2] / "bench" / "judgments" / "flickr8k-test.json"


@pytest.fixture(scope="module")
def everyday() -> ModuleType:
    return load_script("everyday_words")


def test_the_judgments_name_test_photos_once_each() -> None:
    d = json.loads(JUDGED.read_text(encoding="utf-8"))
    test = set((FLICKR / "Flickr_8k.testImages.txt").read_text().split())
    pairs = [(key, w, n) for key in ("shows", "lacks") for w, ns in d[key].items() for n in ns]
    assert {n for _, _, n in pairs} <= test
    judged = [(w, n) for _, w, n in pairs]
    assert len(judged) == len(set(judged))  # no photo both shows and lacks a word


def test_judged_photos_are_relevant_to_the_word_but_not_its_phrases(
    everyday: ModuleType, tmp_path: Path
) -> None:
    path = tmp_path / "j.json"
    path.write_text(json.dumps({"shows": {"cup": ["b.jpg"]}, "lacks": {"cup": ["c.jpg"]}}))
    shows, seen = everyday.judgments(path, ["a.jpg", "b.jpg", "c.jpg"])
    assert shows == {"cup": {1}} and seen == {("cup", 1), ("cup", 2)}
    word = ShortQuery("a cup", "cup", "a word", frozenset({0}))
    phrase = ShortQuery("red cup", "cup", "phrase", frozenset({0}))
    assert everyday.judged_query(word, shows).relevant == {0, 1}
    assert everyday.judged_query(phrase, shows) is phrase
    assert everyday.judged_query(ShortQuery("dog", "dog", "word", frozenset()), shows).word == "dog"
    assert everyday.judgments(None, ["a.jpg"]) == ({}, set())
