"""The relevance model at query time: the shipped JSON, and what it makes of real scores."""

from __future__ import annotations

import json

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.hubness import load_hubness
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.relevance import (
    EVIDENCE_FLOOR,
    FEATURES,
    QUERY_KINDS,
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
from tests.tiny_data import FLICKR

SHIPPED = get_settings().model_dir / "relevance.json"


@pytest.fixture(scope="module")
def shipped() -> RelevanceModel:
    return load_relevance(SHIPPED, checkpoint_identity(get_settings().default_checkpoint))


def searched(photos: np.ndarray) -> np.ndarray:
    """Each photo's shipped hubness penalty: ``/search`` scores a text query's photos
    less it, and the shipped relevance was fitted on those scores."""
    identity = checkpoint_identity(get_settings().default_checkpoint)
    return load_hubness(get_settings().model_dir / "hubness.npz", identity).photo_penalties(photos)


@pytest.fixture(scope="module")
def thirty(parser, tmp_path_factory) -> tuple[object, list[str], np.ndarray]:
    """The shipped checkpoint, the first 30 Flickr8k test photos and their features."""
    model = load_checkpoint(get_settings().default_checkpoint, parser=parser.version)
    names = (FLICKR / "Flickr_8k.testImages.txt").read_text().split()[:30]
    extractor = FeatureExtractor(model.backbone, cache_dir=tmp_path_factory.mktemp("f"))
    return model, names, extractor.embed_files([FLICKR / "Images" / n for n in names])


@pytest.fixture(scope="module")
def real_scores(parser, thirty) -> dict[str, np.ndarray]:
    """Scores of the shipped checkpoint over 30 real Flickr8k test photos, best first (a
    text's as ``/search`` scores them): a caption of the first photo, a word no photo
    shows, and the first photo itself."""
    model, names, feats = thirty
    photos = model.embed_images(feats)
    caption = next(
        ln.split("\t", 1)[1]
        for ln in (FLICKR / "Flickr8k.token.txt").read_text().splitlines()
        if ln.startswith(names[0] + "#")
    )
    texts = model.embed_sentences(parser.parse([caption, "an armadillo"]))
    penalties = searched(photos)
    return {
        "caption": np.sort(photos @ texts[0] - penalties)[::-1],
        "armadillo": np.sort(photos @ texts[1] - penalties)[::-1],
        "photo": np.sort(np.delete(photos @ photos[0], 0))[::-1],
        "novelty": np.array([novelty_of(v, model.channel_columns) for v in texts]),
        "words": word_count(caption),
    }


def test_the_shipped_model_is_small_json_for_the_shipped_checkpoint(shipped):
    assert SHIPPED.stat().st_size < 64_000
    assert json.loads(SHIPPED.read_text())["format"] == 3  # JSON, no pickle
    assert set(shipped.kinds) == set(QUERY_KINDS)
    assert set(shipped.small or {}) == set(QUERY_KINDS)
    assert all(m.features == SMALL_FEATURES for m in (shipped.small or {}).values())
    assert 0.0 < shipped.threshold < 1.0
    # evidence: text queries only, each model reading it and rising with it
    assert set(shipped.evidence or {}) == set(shipped.evidence_small or {}) == {"text-image"}
    for m in (*(shipped.evidence or {}).values(), *(shipped.evidence_small or {}).values()):
        assert m.reads_evidence and m.coef[m.features.index("log_evidence")] > 0
    assert shipped.evidence_threshold is not None and 0.0 < shipped.evidence_threshold < 1.0
    assert shipped.default_threshold(evidence=True) == shipped.evidence_threshold
    assert shipped.default_threshold() == shipped.threshold
    with pytest.raises(RelevanceError, match="another checkpoint"):
        load_relevance(SHIPPED, {"checkpoint_sha256": "0" * 64})


def test_relevance_is_a_probability_that_falls_along_the_ranking(shipped, real_scores):
    for kind, scores in (
        ("text-image", real_scores["caption"]),
        ("text-image", real_scores["armadillo"]),
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
    assert novelty[0] < 0.5 and novelty[1] == pytest.approx(1.0)  # "armadillo": untrained
    guess = shipped.predict("text-image", real_scores["armadillo"], novelty[1], 2)
    assert guess.max() < shipped.threshold  # no armadillo among the 30: "no match"
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
    np.testing.assert_allclose(col["evidence"], 0.0)  # none given
    assert features([]).shape == (0, len(FEATURES))


def test_evidence_features_are_each_hits_own():
    table = features([0.5, 0.3, 0.1], evidence=[0.9, 0.0, 1.5])
    col = {name: table[:, i] for i, name in enumerate(FEATURES)}
    np.testing.assert_allclose(col["evidence"], [0.9, 0.0, 1.0])  # clipped to [0, 1]
    np.testing.assert_allclose(col["log_evidence"], np.log(EVIDENCE_FLOOR + col["evidence"]))
    with pytest.raises(ValueError, match="2 evidence values for 3 scores"):
        features([0.5, 0.3, 0.1], evidence=[0.9, 0.0])


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
    data = shipped.to_dict()
    ev = data["evidence"]["text-image"]
    ev["coef"][ev["features"].index("log_evidence")] = -0.5  # falling with the evidence
    bad.write_text(json.dumps(data))
    with pytest.raises(RelevanceError, match="rise with log_evidence"):
        load_relevance(bad)
    data = shipped.to_dict()
    data["evidence"]["text-image"] = data["kinds"]["text-image"]  # blind to evidence
    bad.write_text(json.dumps(data))
    with pytest.raises(RelevanceError, match="do not read the evidence"):
        load_relevance(bad)
    data = shipped.to_dict()
    data["evidence_threshold"] = 1.5
    bad.write_text(json.dumps(data))
    with pytest.raises(RelevanceError, match="threshold"):
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


def test_the_shipped_score_only_model_reads_a_small_gallery_s_best_hit_above_a_guess(
    shipped, real_scores
):
    # the caption's scores over the first 8 of the 30 photos (its own photo among them)
    few = real_scores["caption"][: TOP // 2]
    kw = {"novelty": float(real_scores["novelty"][0]), "words": real_scores["words"]}
    small = shipped.predict("text-image", few, **kw)
    # its own photo, first, stands out of the other seven (0.22 since the two-collection
    # fit, just under the 0.255 default: it comes back as a weak hit; docs/RESULTS.md)
    assert small[0] > 0.2 and small[0] > small[-1] + 0.05
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
    evidence = np.linspace(0.0, 0.9, 20)
    for kind in QUERY_KINDS:
        np.testing.assert_array_equal(again.predict(kind, scores), shipped.predict(kind, scores))
        few = scores[:8]
        np.testing.assert_array_equal(again.predict(kind, few), shipped.predict(kind, few))
        np.testing.assert_array_equal(
            again.predict(kind, scores, evidence=evidence),
            shipped.predict(kind, scores, evidence=evidence),
        )
    assert again.threshold == shipped.threshold
    assert again.evidence_threshold == shipped.evidence_threshold


def test_a_format_2_file_still_loads_and_ignores_evidence(tmp_path, shipped):
    data = shipped.to_dict()
    data["format"] = 2
    for key in ("evidence", "evidence_small", "evidence_threshold"):
        del data[key]
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    old = load_relevance(path)
    assert not old.evidence and old.evidence_threshold is None
    assert old.default_threshold(evidence=True) == old.threshold
    scores, evidence = np.linspace(0.6, 0.1, 20), np.linspace(0.9, 0.0, 20)
    for kind in QUERY_KINDS:  # evidence passed to a model without evidence models changes nothing
        np.testing.assert_array_equal(
            old.predict(kind, scores, evidence=evidence), shipped.predict(kind, scores)
        )


def test_without_evidence_a_query_is_judged_exactly_as_before(shipped, real_scores):
    plain = shipped.without_evidence()
    kw = {"novelty": float(real_scores["novelty"][0]), "words": real_scores["words"]}
    for scores in (real_scores["caption"], real_scores["caption"][:8], real_scores["armadillo"]):
        np.testing.assert_array_equal(
            shipped.predict("text-image", scores, **kw),
            plain.predict("text-image", scores, **kw),
        )
        np.testing.assert_array_equal(
            shipped.predict("text-image", scores, **kw, evidence=None),
            plain.predict("text-image", scores, **kw),
        )
    # kinds without an evidence model ignore evidence
    photo = real_scores["photo"]
    np.testing.assert_array_equal(
        shipped.predict("image-image", photo, evidence=np.ones(len(photo))),
        shipped.predict("image-image", photo),
    )


def test_evidence_rises_with_the_score_and_with_the_evidence(shipped):
    scores = np.linspace(0.7, 0.2, 20)
    for evidence in (np.zeros(20), np.full(20, 0.3), np.ones(20)):
        p = shipped.predict("text-image", scores, 0.0, 2, evidence)
        assert np.all(np.diff(p) <= 1e-12)  # the same evidence: falls along the ranking
        few = shipped.predict("text-image", scores[:8], 0.0, 2, evidence[:8])
        assert np.all(np.diff(few) <= 1e-12)
    levels = [shipped.predict("text-image", scores, 0.0, 2, np.full(20, e)) for e in (0, 0.3, 1)]
    assert np.all(levels[0] <= levels[1] + 1e-12) and np.all(levels[1] <= levels[2] + 1e-12)
    assert levels[2][0] > levels[0][0]


def test_with_evidence_the_photos_the_tagger_sees_a_dog_in_are_judged_above_the_rest(
    shipped, parser, thirty
):
    """ "a dog" against 30 real Flickr8k test photos, the shipped checkpoint and its vector
    tagger: every photo the tagger sees a dog in is judged more relevant than every photo
    it sees none in, whatever their rank, and more than without evidence. (On so small a
    gallery the top-20 distribution reads two thirds of it: even the dog photos stay
    below the default threshold, with evidence or without: docs/RESULTS.md.)"""
    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.tagger import (
        VECTORS_FILE_NAME,
        WordTagger,
        default_path,
        vectors_identity,
    )

    model, _, feats = thirty
    identity = checkpoint_identity(get_settings().default_checkpoint)
    tagger = WordTagger.load(default_path(VECTORS_FILE_NAME), vectors_identity(identity))
    tree = parser.parse(["a dog"])[0]
    query = model.embed_sentences([tree])[0]
    photos = model.embed_images(feats)
    scores = photos @ query - searched(photos)
    order = np.argsort(-scores)
    evidence = tagger.of(["dog"], photos[order])[:, 0]
    kw = {"novelty": novelty_of(query, model.channel_columns), "words": 2}
    p = shipped.predict("text-image", scores[order], **kw, evidence=evidence)
    seen, unseen = evidence >= 0.5, evidence < 0.05
    assert seen.sum() >= 3 and unseen.sum() >= 10
    assert p[seen].min() > p[unseen].max()
    plain = shipped.predict("text-image", scores[order], **kw)
    assert np.all(p[seen] > plain[seen]) and np.all(p[unseen] <= plain[unseen] + 0.01)
    assert np.all(plain < shipped.threshold)


def test_a_short_query_threshold_applies_to_short_queries_with_evidence_only(shipped, tmp_path):
    """``fit-relevance --short`` (not shipped): queries of 1..SHORT_WORDS words judged with
    evidence take ``short_threshold``; longer ones and queries without evidence do not;
    it survives the JSON round trip, and the shipped model has none."""
    from dataclasses import replace

    from groundsearch.model.runtime.relevance import SHORT_WORDS

    assert shipped.short_threshold is None
    assert shipped.default_threshold(evidence=True, words=2) == shipped.evidence_threshold
    model = replace(shipped, short_threshold=0.4)
    assert model.default_threshold(evidence=True, words=SHORT_WORDS) == 0.4
    assert (
        model.default_threshold(evidence=True, words=SHORT_WORDS + 1) == shipped.evidence_threshold
    )
    assert model.default_threshold(evidence=False, words=2) == shipped.threshold
    model.save(tmp_path / "r.json")
    assert load_relevance(tmp_path / "r.json").short_threshold == 0.4
    with pytest.raises(RelevanceError, match="threshold"):
        replace(shipped, short_threshold=1.5)
