"""Short queries' fusion: evidence lifts the photos that show the thing, per query length,
keeping the score's scale; the file round-trips and refuses what it cannot use."""

from __future__ import annotations

import json

import numpy as np
import pytest

from groundsearch.model.runtime.fusion import (
    Fusion,
    FusionError,
    content_words,
    load_fusion,
    logit,
    ranked_relevance,
    standardised,
)
from tests.paper_trees import bikes_ride, students

ID = {"checkpoint_sha256": "ab" * 32}


def test_standardised_reads_known_values_and_leaves_unknown_ones_neutral():
    z = standardised(np.array([1.0, 3.0, np.nan, 5.0]))
    assert np.allclose(z[[0, 1, 3]], [-1.224745, 0.0, 1.224745]) and z[2] == 0.0
    assert np.all(standardised(np.array([2.0, 2.0, 2.0])) == 0.0)  # constant: no push
    assert np.all(standardised(np.array([np.nan, 1.0])) == 0.0)  # one known value
    assert np.allclose(logit(np.array([0.5, 0.0, 1.0])), [0.0, -6.906755, 6.906755])


def test_a_fused_rankings_relevance_never_rises_down_it():
    shown = ranked_relevance(np.array([0.2, 0.7, np.nan, 0.4, 0.1]))
    assert np.allclose(shown, [0.7, 0.7, 0.4, 0.4, 0.1])  # a hit's at least any below it
    assert (
        ranked_relevance(np.array([np.nan])).size == 1 and ranked_relevance(np.array([])).size == 0
    )


def test_evidence_lifts_the_photo_that_shows_it_and_the_scale_stays():
    scores = np.array([0.50, 0.48, 0.47, 0.30, 0.10])
    classes = np.array([0.0, 0.0, 0.9, 0.0, np.nan])  # photo 2 is a dog; 4's unknown
    fusion = Fusion(((1.0, 0.0, 0.0),), ID)
    fused = fusion.fuse(scores, classes, None, words=1)
    assert int(np.argmax(fused)) == 2  # the dog first
    assert fused[4] == pytest.approx(scores[4])  # unknown evidence: no push
    z = (scores - scores.mean()) / scores.std()
    known = classes[:4]
    push = standardised(np.append(logit(known), np.nan))
    assert np.allclose(fused, scores + scores.std() * push)  # s + sd(s) · w z(logit c)
    assert np.argsort(-fused).tolist() == np.argsort(-(z + push)).tolist()
    # a query length without weights, or no evidence at all, keeps the joint scores
    assert np.array_equal(fusion.fuse(scores, classes, None, words=2), scores)
    assert np.array_equal(fusion.fuse(scores, None, None, words=1), scores)


def test_left_out_photos_stay_out_and_do_not_count():
    scores = np.array([0.5, -np.inf, 0.4, 0.3])
    tagger = np.array([0.1, 0.99, 0.2, 0.9])
    fused = Fusion(((0.0, 2.0, 0.0),)).fuse(scores, None, tagger)
    assert fused[1] == -np.inf and int(np.argmax(fused)) == 3
    kept = np.array([0.5, 0.4, 0.3])
    alone = Fusion(((0.0, 2.0, 0.0),)).fuse(kept, None, tagger[[0, 2, 3]])
    assert np.allclose(fused[[0, 2, 3]], alone)


def test_the_rule_reads_the_query_length_and_its_nouns():
    fusion = Fusion(((0.25, 2.0, 1.0), (0.0, 1.0, 0.0), (0.0, 0.0, 0.0)), ID)
    assert fusion.max_words == 2
    assert fusion.applies(1, 1) and fusion.applies(2, 2)
    assert not fusion.applies(3, 1) and not fusion.applies(4, 1)  # no weights
    assert not fusion.applies(1, 0) and not fusion.applies(0, 1)  # no noun, no word
    assert content_words(students()) == 4 and content_words(bikes_ride()) == 2


def test_a_fusion_file_round_trips_and_refuses_what_it_cannot_use(tmp_path):
    path = tmp_path / "fusion.json"
    fusion = Fusion(((0.25, 2.0, 1.5), (0.0, 1.0, 0.0)), ID, {"command": "test"})
    fusion.save(path)
    assert load_fusion(path, ID) == fusion
    with pytest.raises(FusionError, match="another checkpoint"):
        load_fusion(path, {"checkpoint_sha256": "cd" * 32})
    body = json.loads(path.read_text())
    for broken, message in (
        ({**body, "format": 9}, "format 1"),
        ({k: v for k, v in body.items() if k != "weights"}, "malformed"),
        ({**body, "weights": [{"classes": -1, "tagger": 0}]}, "negative"),
        ({**body, "weights": [{"classes": "x", "tagger": 0}]}, "malformed"),
        ({**body, "weights": [{"classes": 0, "tagger": 0, "objects": -2}]}, "negative"),
    ):
        path.write_text(json.dumps(broken))
        with pytest.raises(FusionError, match=message):
            load_fusion(path)
    path.write_text("{not json")
    with pytest.raises(FusionError, match="cannot read fusion file"):
        load_fusion(path)
    with pytest.raises(FusionError, match="finite"):
        Fusion(((float("nan"), 1.0, 0.0),))
    with pytest.raises(FusionError, match="a weight for each of"):
        Fusion(((0.25, 1.0),))  # type: ignore[arg-type]
    # a file written before the detector's channel reads it as weight 0
    path.write_text(json.dumps({**body, "weights": [{"classes": 0.25, "tagger": 2.0}]}))
    assert load_fusion(path).weights == ((0.25, 2.0, 0.0),)


def test_the_detectors_channel_lifts_the_photo_it_sees_the_thing_in():
    scores = np.array([0.50, 0.48, 0.47, 0.30])
    objects = np.array([0.05, 0.02, 0.85, 0.01])  # the detector sees a dog in photo 2
    fusion = Fusion(((0.0, 0.0, 1.0),), ID)
    assert int(np.argmax(fusion.fuse(scores, None, None, 1, objects))) == 2
    assert np.array_equal(fusion.fuse(scores, None, None, 1), scores)  # none stored
    # each channel by its own weight: the classes' weight does not move the detector's
    off = Fusion(((1.0, 0.0, 0.0),), ID).fuse(scores, None, None, 1, objects)
    assert np.array_equal(off, scores)
