"""The held-out-concept protocol's figures on hand-made scores and a tiny split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from groundsearch.model.data.flickr import CaptionedImages
from groundsearch.model.data.held_out_concepts import resolve
from groundsearch.model.training.evaluation.held_out import (
    caption_ranks,
    held_out_metrics,
    photo_best_words,
    ranked_query_metrics,
    single_queries,
)


def test_precision_at_5_and_capped_recall_at_10():
    scores = np.array([[9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1, -2.0]])
    rows = ranked_query_metrics(scores, [{0, 2, 11}])
    assert rows[0]["p@5"] == pytest.approx(40.0)  # photos 0 and 2 of the top five
    assert rows[0]["r@10"] == pytest.approx(100 * 2 / 3)  # photo 11 is 12th
    many = set(range(12))
    assert ranked_query_metrics(scores, [many])[0]["r@10"] == pytest.approx(100.0)  # capped


def test_caption_ranks_count_better_photos():
    scores = np.array([[0.1, 0.9, 0.5], [0.3, 0.2, 0.1]])
    assert caption_ranks(scores, np.array([2, 0])).tolist() == [2, 1]


class _Texts:
    """Texts → fixed vectors by their words: a stand-in embedder whose answers are known."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def parse(self, texts: list[str]) -> list:
        return [_Text(t) for t in texts]

    def embed(self, trees) -> np.ndarray:
        return np.stack([self.vectors.get(t.text, np.zeros(3)) for t in trees])


class _Text:
    def __init__(self, text: str) -> None:
        self.text = text


def test_held_out_metrics_on_a_tiny_split():
    ds = CaptionedImages(
        Path("."),
        ("cat.jpg", "dog.jpg", "car.jpg"),
        ("A cat on a sofa .", "A dog runs .", "A red car .", "A kitten sitting ."),
        (0, 1, 2, 0),
    )
    e = np.eye(3)
    texts = _Texts(
        {
            "a cat": e[0],
            "a car": e[2],
            "A cat on a sofa .": e[0],
            "A dog runs .": e[1],
            "A red car .": e[0],  # points at the cat photo: rank 2 for its own
            "A kitten sitting .": e[0],
            "a cat sitting": e[0],
            "a red car": e[2],
        }
    )
    photos = np.eye(3)
    asked = (texts.embed, photos, ds, texts.parse(list(ds.captions)), texts.parse)
    out = held_out_metrics(*asked, resolve(["cat", "car"]))
    singles = {q["query"]: q for q in out["single"]["queries"]}
    assert singles["a cat"]["relevant"] == 1 and singles["a cat"]["top5"][0] == 0
    assert singles["a cat"]["r@10"] == 100.0 and singles["a cat"]["p@5"] == 20.0
    assert {q["query"] for q in out["compositional"]["queries"]} == {"a cat sitting", "a red car"}
    assert "a cat and a person" in out["compositional"]["left_out"]
    held = out["captions"]["held_out"]
    assert held["captions"] == 3 and held["r@1"] == pytest.approx(100 * 2 / 3)
    assert out["captions"]["others"]["captions"] == 1
    # ranked as /search ranks, less each photo's hubness penalty: a penalty on the cat
    # photo sends it below the others for "a cat", and "A red car ." finds its own photo
    fixed = held_out_metrics(*asked, resolve(["cat", "car"]), np.array([1.5, 0.0, 0.0]))
    singles = {q["query"]: q for q in fixed["single"]["queries"]}
    assert singles["a cat"]["top5"][0] != 0 and singles["a car"]["top5"][0] == 2
    assert fixed["captions"]["held_out"]["r@1"] == pytest.approx(100 * 1 / 3)
    same = held_out_metrics(*asked, resolve(["cat", "car"]), np.full(3, 0.3))
    assert same["single"] == out["single"] and same["captions"] == out["captions"]


def test_single_queries_name_each_concept():
    queries = single_queries(resolve(["cat", "snow"]))
    assert [q.text for q in queries] == ["a cat", "snow"]


def test_photo_best_words_judges_the_top_word():
    words = ("cat", "clock")
    vectors = {"a cat": np.array([1.0, 0]), "a clock": np.array([0, 1.0])}
    texts = _Texts(vectors)
    photos = np.array([[0.9, 0.1], [0.8, 0.2]])
    out = photo_best_words(
        texts.embed,
        photos,
        ["chelsea.png", "clock_motion.png"],
        texts.parse,
        words,
    )
    assert [r["best"][0] for r in out["photos"]] == ["cat", "cat"]
    assert out["top1_right"] == 1 and out["judged"] == 2
    # searching: "a cat" finds chelsea, "a clock" finds clock_motion (0.2 > 0.1)
    assert [s["best_photo"] for s in out["searches"]] == ["chelsea.png", "clock_motion.png"]
    assert out["search_right"] == 2
