"""The relevance model at query time: the shipped JSON, and what it makes of real scores."""

from __future__ import annotations

import json

import numpy as np
import pytest

from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.relevance import (
    FEATURES,
    KINDS,
    SMALL_FEATURES,
    TOP,
    KindModel,
    RelevanceError,
    RelevanceModel,
    features,
    load_relevance,
    novelty_of,
    word_count,
)
from groundsearch.settings import get_settings
from tests.tiny_data import FLICKR

SHIPPED = get_settings().model_dir / "relevance.json"


@pytest.fixture(scope="module")
def shipped() -> RelevanceModel:
    return load_relevance(SHIPPED, checkpoint_identity(get_settings().default_checkpoint))


@pytest.fixture(scope="module")
def real_scores(parser, tmp_path_factory) -> dict[str, np.ndarray]:
    """Scores of the shipped checkpoint over 30 real Flickr8k test photos, best first:
    a caption of the first photo, a word no photo shows, and the first photo itself."""
    model = load_checkpoint(get_settings().default_checkpoint, parser=parser.version)
    names = (FLICKR / "Flickr_8k.testImages.txt").read_text().split()[:30]
    extractor = FeatureExtractor(model.backbone, cache_dir=tmp_path_factory.mktemp("f"))
    photos = model.embed_images(extractor.embed_files([FLICKR / "Images" / n for n in names]))
    caption = next(
        ln.split("\t", 1)[1]
        for ln in (FLICKR / "Flickr8k.token.txt").read_text().splitlines()
        if ln.startswith(names[0] + "#")
    )
    texts = model.embed_sentences(parser.parse([caption, "a giraffe"]))
    return {
        "caption": np.sort(photos @ texts[0])[::-1],
        "giraffe": np.sort(photos @ texts[1])[::-1],
        "photo": np.sort(np.delete(photos @ photos[0], 0))[::-1],
        "novelty": np.array([novelty_of(v, model.channel_columns) for v in texts]),
        "words": word_count(caption),
    }


def test_the_shipped_model_is_small_json_for_the_shipped_checkpoint(shipped):
    assert SHIPPED.stat().st_size < 64_000
    assert json.loads(SHIPPED.read_text())["format"] == 2  # JSON, no pickle
    assert set(shipped.kinds) == set(KINDS)
    assert set(shipped.small or {}) == set(KINDS)
    assert all(m.features == SMALL_FEATURES for m in (shipped.small or {}).values())
    assert 0.0 < shipped.threshold < 1.0
    with pytest.raises(RelevanceError, match="another checkpoint"):
        load_relevance(SHIPPED, {"checkpoint_sha256": "0" * 64})


def test_relevance_is_a_probability_that_falls_along_the_ranking(shipped, real_scores):
    for kind, scores in (
        ("text-image", real_scores["caption"]),
        ("text-image", real_scores["giraffe"]),
        ("arithmetic", real_scores["caption"]),
        ("image-image", real_scores["photo"]),
        ("image-caption", real_scores["caption"]),
    ):
        p = shipped.predict(kind, scores)
        assert p.shape == scores.shape
        assert np.all((p >= 0) & (p <= 1))
        assert np.all(np.diff(p) <= 1e-12), (kind, p)  # monotone in the score


def test_every_kind_rises_with_the_score(shipped):
    for kind, model in shipped.kinds.items():
        assert model.coef[model.features.index("score")] > 0, kind
        assert np.all(np.diff(model.iso_y) >= 0), kind  # the isotonic map never falls


def test_a_word_no_photo_shows_is_no_match(shipped, real_scores):
    novelty = real_scores["novelty"]
    assert novelty[0] < 0.5 and novelty[1] == pytest.approx(1.0)  # "giraffe": untrained
    guess = shipped.predict("text-image", real_scores["giraffe"], novelty[1], 2)
    assert guess.max() < shipped.threshold  # no giraffe among the 30: "no match"
    words = real_scores["words"]
    match = shipped.predict("text-image", real_scores["caption"], novelty[0], words)
    assert match[0] == match.max() > 0


def test_features_of_a_query():
    table = features([0.5, 0.3, 0.1, 0.1], novelty=0.25, top=3, words=word_count("A dog ."))
    col = {name: table[:, i] for i, name in enumerate(FEATURES)}
    np.testing.assert_allclose(col["score"], [0.5, 0.3, 0.1, 0.1])
    np.testing.assert_allclose(col["mean"], 0.3)  # of the top 3
    np.testing.assert_allclose(col["lead"], 0.2)
    np.testing.assert_allclose(col["novelty"], 0.25)
    np.testing.assert_allclose(col["log_words"], np.log1p(2))
    assert features([]).shape == (0, len(FEATURES))


def test_a_malformed_file_is_refused(tmp_path, shipped):
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    with pytest.raises(RelevanceError, match="cannot read"):
        load_relevance(bad)
    data = shipped.to_dict()
    data["kinds"]["text-image"]["isotonic"]["y"] = data["kinds"]["text-image"]["isotonic"]["y"][
        ::-1
    ]
    bad.write_text(json.dumps(data))
    with pytest.raises(RelevanceError, match="non-decreasing"):
        load_relevance(bad)
    data = shipped.to_dict()
    data["kinds"]["text-image"]["features"] = ["score", "colour", "mean", "lead", "novelty"]
    bad.write_text(json.dumps(data))
    with pytest.raises(RelevanceError):
        load_relevance(bad)
    data = shipped.to_dict()
    data["kinds"]["arithmetic"]["coef"][0] = -1.0  # falling with the score: refused
    bad.write_text(json.dumps(data))
    with pytest.raises(RelevanceError, match="rise with the score"):
        load_relevance(bad)
    bad.write_text(json.dumps({"format": 99}))
    with pytest.raises(RelevanceError, match="format"):
        load_relevance(bad)


def _kind(names: tuple[str, ...], coef: float, shift: float) -> KindModel:
    n = len(names)
    return KindModel(
        names,
        np.zeros(n),
        np.ones(n),
        np.r_[coef, np.zeros(n - 1)],
        shift,
        np.array([0.0, 1.0]),
        np.array([0.0, 1.0]),
    )


def test_the_score_only_model_scores_queries_with_fewer_than_top_scores():
    full = _kind(("score", "mean", "lead"), 1.0, -3.0)
    small = _kind(SMALL_FEATURES, 1.0, 3.0)
    model = RelevanceModel({"text-image": full}, 0.5, {}, small={"text-image": small})
    few, many = np.linspace(0.6, 0.1, TOP - 1), np.linspace(0.6, 0.1, TOP)
    assert model.model_for("text-image", TOP - 1) is small
    assert model.model_for("text-image", TOP) is full
    np.testing.assert_allclose(
        model.predict("text-image", few), small.predict(features(few)), rtol=0, atol=0
    )
    np.testing.assert_allclose(model.predict("text-image", many), full.predict(features(many)))
    assert model.predict("text-image", few).min() > model.predict("text-image", many).max()
    # without a score-only model, the full one scores every query
    bare = RelevanceModel({"text-image": full}, 0.5, {})
    assert bare.model_for("text-image", 3) is full
    with pytest.raises(RelevanceError, match="more than the score"):
        RelevanceModel({"text-image": full}, 0.5, {}, small={"text-image": full})


def test_the_shipped_score_only_model_keeps_a_caption_on_a_small_gallery(shipped, real_scores):
    # the caption's scores over the first 8 of the 30 photos (its own photo among them)
    few = real_scores["caption"][: TOP // 2]
    kw = {"novelty": float(real_scores["novelty"][0]), "words": real_scores["words"]}
    small = shipped.predict("text-image", few, **kw)
    assert small[0] >= shipped.threshold  # the full model read this as a guess (0.04)
    assert np.all(np.diff(small) <= 1e-12)


def test_a_format_1_file_still_loads_without_score_only_models(tmp_path, shipped):
    data = shipped.to_dict()
    data["format"] = 1
    del data["small"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = load_relevance(path)
    assert not old.small
    few = np.linspace(0.6, 0.1, 8)
    np.testing.assert_array_equal(
        old.predict("text-image", few), shipped.kinds["text-image"].predict(features(few))
    )


def test_the_model_round_trips_through_json(tmp_path, shipped):
    path = tmp_path / "again.json"
    shipped.save(path)
    again = load_relevance(path)
    scores = np.linspace(0.6, 0.1, 20)
    for kind in KINDS:
        np.testing.assert_array_equal(again.predict(kind, scores), shipped.predict(kind, scores))
        few = scores[:8]
        np.testing.assert_array_equal(again.predict(kind, few), shipped.predict(kind, few))
    assert again.threshold == shipped.threshold
