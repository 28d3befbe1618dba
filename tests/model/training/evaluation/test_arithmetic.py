"""The arithmetic protocol: concepts, pairs, mentions and the three queries' scores, on
hand-made joint spaces where the right answer is known, and on real parses."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.model.runtime.arithmetic import arithmetic_query, centre_rerank
from groundsearch.model.training.evaluation.arithmetic import (
    DEFAULT_PAIRS,
    Concept,
    evaluate_arithmetic,
    mentions,
    parse_pairs,
    photo_words,
    score_pair,
    stratified_interval,
    top_k,
)
from tests.bench import load_script

paired_difference = load_script("arithmetic_examples").paired_difference

# A joint space with one axis per concept: dog, man, beach, snow.
AXES = {"dog": 0, "man": 1, "beach": 2, "snow": 3}
# Photos: dog+beach, man+beach, dog+snow, man+snow, man+beach again, dog+beach again.
PHOTOS = [("dog", "beach"), ("man", "beach"), ("dog", "snow"), ("man", "snow"),
          ("man", "beach"), ("dog", "beach")]  # fmt: skip


def vec(*words: str) -> np.ndarray:
    v = np.zeros(4)
    for w in words:
        v[AXES[w]] = 1.0
    return v / np.linalg.norm(v)


IMAGES = np.stack([vec(*p) for p in PHOTOS])
WORDS = [frozenset(p) for p in PHOTOS]


def embed_texts(texts: list[str]) -> np.ndarray:
    return np.stack([vec(t) for t in texts])


def test_concepts_and_pairs_parse_or_say_why():
    assert Concept.parse(" Running/Run ") == Concept("running", "run")
    assert Concept.parse("dog").forms == {"dog"}
    pairs = parse_pairs("dog>man, running/run>sitting/sit,")
    assert [p.label for p in pairs] == ["dog→man", "running→sitting"]
    assert len(parse_pairs(DEFAULT_PAIRS)) == 20
    bad_specs = [
        ("dog", "write A>B"),
        ("dog>man>cat", "write A>B"),
        ("", "no pairs"),
        ("dog>dog", "same word"),
        ("running/run>run", "same word"),
        ("dog>ca7", "bad concept"),
        ("/run>dog", "bad concept"),
    ]
    for bad, why in bad_specs:
        with pytest.raises(ValueError, match=why):
            parse_pairs(bad)


def test_words_come_from_text_and_lemma_of_every_caption(parser):
    trees = parser.parse(["Two dogs ran on the beach .", "A man sits .", "A white dog ."])
    words = photo_words(trees, np.array([0, 1, 1]), 2)
    assert {"dogs", "dog", "ran", "run", "beach"} <= words[0]
    assert mentions(words, Concept("dog", "dog")).tolist() == [True, True]
    assert mentions(words, Concept("running", "run")).tolist() == [True, False]
    assert mentions(words, Concept("sitting", "sit")).tolist() == [False, True]
    assert mentions(words, Concept("snow", "snow")).tolist() == [False, False]


def test_arithmetic_query_is_the_normalised_sum():
    q = arithmetic_query(vec("dog", "beach"), [vec("man")], [vec("dog")])
    assert np.linalg.norm(q) == pytest.approx(1.0)
    assert np.argmax(IMAGES @ q) in (1, 4)  # man on a beach
    assert arithmetic_query(np.zeros(3)).tolist() == [0, 0, 0]


def test_top_k_leaves_the_start_out_and_reranks_like_the_service():
    assert 0 not in top_k(IMAGES[0].copy(), IMAGES, 3, exclude=0)
    assert top_k(IMAGES[0].copy(), IMAGES, 1, exclude=0).tolist() == [5]  # its twin
    hits = top_k(vec("dog"), IMAGES, 2, exclude=1, rerank=True)
    assert len(hits) == 2 and 1 not in hits
    order, scores = centre_rerank(IMAGES[[0, 3, 5]], top=1)
    assert order.tolist() == [0, 2, 1]
    assert list(scores) == sorted(scores, reverse=True)


def test_score_pair_on_a_space_where_arithmetic_works():
    pair = parse_pairs("dog>man")[0]
    row = score_pair(pair, IMAGES, WORDS, vec("dog"), vec("man"), k=2, examples=1,
                     names=[f"p{i}" for i in range(6)], features=IMAGES)  # fmt: skip
    assert row["starts"] == 3 and row["photos_with_b"] == 3
    # dog+beach − dog + man = man+beach: both men on a beach, never a dog
    assert row["arithmetic"]["share_b"] == 100 and row["arithmetic"]["share_a"] == 0
    assert row["per_start"]["arithmetic"] == [100.0] * 3 and len(row["per_start"]["photo"]) == 3
    assert row["text"]["share_b"] == 100  # "man" alone: all three are men
    assert row["photo"]["share_b"] == 50 and row["photo"]["share_a"] == 50  # twin + a tie
    assert row["arithmetic"]["likeness"] > row["text"]["likeness"]
    assert row["examples"][0]["start"] == "p0" and row["examples"][0]["arithmetic"][0] in (
        "p1",
        "p4",
    )


def test_evaluate_arithmetic_averages_pairs_that_pass_the_rule():
    pairs = parse_pairs("dog>man,beach>snow,snow>dog")
    got = evaluate_arithmetic(
        IMAGES, [], np.array([], dtype=int), embed_texts, pairs, k=2,
        min_starts=2, min_b_photos=3, features=IMAGES,
    )  # fmt: skip
    # photo_words of no captions: nothing is mentioned, so every pair is skipped
    assert got["mean"]["pairs"] == 0 and all("skipped" in r for r in got["pairs"])
    with pytest.raises(ValueError, match="k must be between 1 and 5"):
        evaluate_arithmetic(IMAGES, [], np.array([], dtype=int), embed_texts, pairs, k=6)


def test_evaluate_arithmetic_on_real_parses(parser):
    captions = [f"A {a} on the {b} ." for a, b in PHOTOS]
    got = evaluate_arithmetic(
        IMAGES, parser.parse(captions), np.arange(6), embed_texts,
        parse_pairs("dog>man,beach>snow"), k=2, min_starts=3, min_b_photos=3, features=IMAGES,
    )  # fmt: skip
    dog, beach = got["pairs"]
    assert dog["starts"] == 3 and "skipped" not in dog
    assert beach["starts"] == 4 and beach["photos_with_b"] == 2 and "skipped" in beach
    assert got["mean"]["pairs"] == 1
    assert got["mean"]["arithmetic"]["share_b"] == dog["arithmetic"]["share_b"] == 100
    assert 0 < got["mean"]["likeness_any_two"] < 100


def test_stratified_interval_resamples_within_groups():
    constant = [np.full(5, 40.0), np.full(3, 60.0)]
    assert stratified_interval(constant, resamples=50) == [50.0, 50.0]
    spread = [np.array([0.0, 100.0] * 10), np.full(4, 50.0)]
    low, high = stratified_interval(spread, resamples=500, seed=1)
    assert low < 50 < high and high - low < 25
    assert stratified_interval(spread, resamples=500, seed=1) == [low, high]
    with pytest.raises(ValueError, match="at least one value"):
        stratified_interval([np.array([])])


def test_paired_difference_compares_start_photo_by_start_photo():
    def result(shares_by_pair: dict[str, list[float]], skipped: tuple[str, ...] = ()) -> dict:
        rows = [{"pair": pair, "per_start": {"arithmetic": shares}} for pair, shares in
                shares_by_pair.items()]  # fmt: skip
        for row in rows:
            if row["pair"] in skipped:
                row["skipped"] = "too few"
        return {"pairs": rows}

    first = result({"a→b": [0.0, 20.0], "c→d": [40.0], "e→f": [0.0]}, skipped=("e→f",))
    second = result({"a→b": [20.0, 40.0], "c→d": [20.0], "e→f": [100.0]})
    got = paired_difference(first, second)
    assert got["pairs"] == 2 and got["difference"] == 0.0  # +20 and −20
    assert got["pairs_higher"] == 1 and got["ci95"] == [0.0, 0.0]
    with pytest.raises(ValueError, match="do not share their start photos"):
        paired_difference(first, result({"a→b": [20.0]}))
    with pytest.raises(ValueError, match="no scored pair in common"):
        paired_difference(first, result({"x→y": [20.0]}))


def test_the_photo_enters_arithmetic_without_its_concept_columns():
    photo = np.array([1.0, 0.0, 0.5, 0.5])  # two joint columns, two channel columns
    giraffe = np.array([0.0, 0.0, 0.0, 1.0])  # an untrained word: channel only
    q = arithmetic_query(photo, [giraffe], channel_columns=2)
    np.testing.assert_allclose(q, np.array([1.0, 0.0, 0.0, 1.0]) / np.sqrt(2))
    assert arithmetic_query(photo, channel_columns=2)[2:].tolist() == [0, 0]
