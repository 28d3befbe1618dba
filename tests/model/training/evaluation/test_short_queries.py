"""The short-query protocol: each present everyday word in its three forms, phrases read
off the captions' trees with their own labels, and P@k / AP beside their ceilings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from groundsearch.model.data.flickr import CaptionedImages
from groundsearch.model.training.evaluation.everyday import article
from groundsearch.model.training.evaluation.short_queries import (
    ranking_figures,
    short_queries,
    table,
)

CAPTIONS = [
    "A black dog runs on the grass .",
    "A black dog sleeps on the grass .",
    "A black dog sits on the grass .",
    "A brown dog sits in the snow .",
    "A cat sits on a bed .",
    "A man rides a bike .",
]


def test_ranking_figures_against_a_hand_count():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0, -0.1])
    relevant = frozenset({0, 2, 9})  # ranks 1, 3 and 10
    f = ranking_figures(scores, relevant)
    assert f["p@5"] == pytest.approx(2 / 5) and f["p@5_ceiling"] == pytest.approx(3 / 5)
    assert f["p@10"] == pytest.approx(3 / 10) and f["p@10_ceiling"] == pytest.approx(3 / 10)
    assert f["ap"] == pytest.approx((1 / 1 + 2 / 3 + 3 / 10) / 3)
    perfect = ranking_figures(-np.arange(11.0), frozenset({0, 1}))
    assert perfect["ap"] == 1.0 and perfect["p@5"] == perfect["p@5_ceiling"] == 0.4
    tied = ranking_figures(np.zeros(4), frozenset({3}))  # ties: photo order
    assert tied["ap"] == pytest.approx(1 / 4)


def test_each_present_word_in_its_forms_with_phrases_from_the_trees(parser):
    ds = CaptionedImages(Path("."), tuple(f"{i}.jpg" for i in range(6)), tuple(CAPTIONS),
                         tuple(range(6)))  # fmt: skip
    queries = short_queries(ds, parser.parse(CAPTIONS))
    by_text = {q.text: q for q in queries}
    # "dog" is in 4 photos' captions (present: 3 or more); "cat", "bed", "bike" are not
    assert {q.word for q in queries} == {"dog", "grass"}
    assert by_text["dog"].relevant == by_text["a dog"].relevant == frozenset({0, 1, 2, 3})
    assert by_text["dog"].form == "word" and by_text["a dog"].form == "a word"
    assert "a grass" not in by_text and by_text["grass"].relevant == frozenset({0, 1, 2})
    # a modifier on the word in 3 photos; "brown dog" (1 photo) is not asked
    assert by_text["black dog"].form == "phrase"
    assert by_text["black dog"].relevant == frozenset({0, 1, 2})
    assert "brown dog" not in by_text
    # a place beside the word under the same head ("dog … on the grass")
    assert by_text["dog on grass"].relevant == frozenset({0, 1, 2})
    assert article("apple") == "an" and article("dog") == "a"


def test_a_word_is_shown_by_its_kinds_as_a_noun_never_as_a_colour(parser):
    captions = [
        "A man in an orange shirt stands .",
        "A woman in an orange hat sits .",
        "A boy in an orange coat runs .",
        "A puppy plays with a ball .",
    ]
    ds = CaptionedImages(Path("."), tuple(f"{i}.jpg" for i in range(4)), tuple(captions),
                         tuple(range(4)))  # fmt: skip
    by_text = {q.text: q for q in short_queries(ds, parser.parse(captions))}
    # a man, a woman and a boy are each a person; "orange" is their clothes' colour
    assert by_text["a person"].relevant == frozenset({0, 1, 2})
    assert "orange" not in by_text and "an orange" not in by_text


def test_the_table_averages_each_form():
    class Q:
        def __init__(self, form: str, relevant: set[int]) -> None:
            self.form, self.relevant = form, frozenset(relevant)

    queries = [Q("word", {0}), Q("a word", {1}), Q("a word", {0})]
    rows = -np.arange(12.0)  # photo 0 first
    figures = table(queries, lambda i: rows)  # type: ignore[arg-type]
    assert figures["word"]["ap"] == 1.0 and figures["word"]["queries"] == 1
    assert figures["a word"]["ap"] == pytest.approx((1 / 2 + 1) / 2)
    assert figures["all"]["queries"] == 3 and "phrase" not in figures
