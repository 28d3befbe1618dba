"""Fitting and measuring the relevance model, on a few real Flickr8k photos."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.data import DatasetError, load_captioned_images
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.evidence import NounClasses, top_classes, top_of
from groundsearch.model.runtime.relevance import FEATURES, RelevanceModel
from groundsearch.model.training.evaluation.everyday import PRESENT
from groundsearch.model.training.relevance.fitting import (
    EVIDENCE_FEATURES,
    EVIDENCE_SMALL_FEATURES,
    KIND_FEATURES,
    fit,
    fit_evidence,
    source_weights,
)
from groundsearch.model.training.relevance.labels import (
    caption_photo_relevant,
    consensus_nouns,
    main_nouns,
    subject_noun,
)
from groundsearch.model.training.relevance.measures import calibration, measure
from groundsearch.model.training.relevance.pools import Pool
from groundsearch.model.training.relevance.queries import (
    CONCEPTS,
    FORMS_ONLY,
    caption_pools,
    concept_pool,
    concept_runs,
    everyday_runs,
    similar_pool,
)
from groundsearch.model.training.relevance.splits import SplitData
from groundsearch.model.training.relevance.threshold import (
    caption_figures,
    caption_relevance,
    choose_threshold,
    idle_rules,
    no_match_figures,
)
from tests.tiny_data import make_tiny_flickr


@pytest.fixture(scope="module")
def split(parser, tmp_path_factory) -> tuple[SplitData, object]:
    """20 real Flickr8k test photos and their 100 captions, embedded by the shipped model,
    with the photos' top classes for evidence."""
    from groundsearch.model.runtime.images.features import FeatureExtractor

    root = make_tiny_flickr(tmp_path_factory.mktemp("rel"), train=0, dev=0, test=20)
    ds = load_captioned_images(root, split="test")
    model = load_checkpoint(get_settings().default_checkpoint, parser=parser.version)
    extractor = FeatureExtractor(model.backbone, cache_dir=tmp_path_factory.mktemp("feat"))
    feats = extractor.embed_files([ds.image_path(i) for i in range(20)])
    photos = model.embed_images(feats)
    trees = parser.parse(list(ds.captions))
    classes = top_classes(model.concepts.class_probabilities(feats))
    data = SplitData(
        ds,
        trees,
        photos,
        model.embed_sentences(trees),
        model.channel_columns,
        classes,
        NounClasses.load(),
    )
    return data, model


def test_top_of_sorts_each_row_best_first():
    scores = np.array([[0.1, 0.5, 0.3, 0.5], [0.0, -1.0, 2.0, 1.0]])
    idx, vals = top_of(scores, 3)
    assert idx.tolist() == [[1, 3, 2], [2, 3, 0]]  # ties by column
    np.testing.assert_allclose(vals, [[0.5, 0.5, 0.3], [2.0, 1.0, 0.0]])


def test_calibration_error_of_known_predictions():
    y = np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0])
    assert calibration(np.full(10, 0.2), y)["ece"] == pytest.approx(0.0)
    assert calibration(np.full(10, 0.9), y)["ece"] == pytest.approx(0.7)
    both = calibration(np.array([0.95] * 2 + [0.05] * 8), y)
    assert both["ece"] == pytest.approx(0.05 * 0.2 + 0.05 * 0.8)
    assert sum(b["hits"] for b in both["bins"]) == 10


def test_source_weights_give_each_source_its_share():
    sources = np.array(["captions"] * 8 + ["concepts"] * 2)
    w = source_weights(sources, {"concepts": 0.5})
    assert w[sources == "concepts"].sum() == pytest.approx(w[sources == "captions"].sum())
    assert w.sum() == pytest.approx(10)


def test_fitted_on_real_captions_relevance_rises_with_the_score(split):
    data, _ = split
    pools = {k: Pool() for k in ("text-image", "image-caption", "image-image", "arithmetic")}
    caption_pools(data, pools, top=10)
    assert pools["text-image"].queries == 100 and pools["image-caption"].queries == 20
    kinds = fit({k: pools[k] for k in ("text-image", "image-caption")}, {})
    for kind, model in kinds.items():
        assert model.features == KIND_FEATURES[kind]
        assert model.coef[model.features.index("score")] > 0, kind
        x, y, _, _ = pools[kind].arrays()
        p = model.predict(x)
        assert np.all((p >= 0) & (p <= 1))
        assert p[y == 1].mean() > p[y == 0].mean() + 0.1, kind  # it tells matches apart
        # out-of-fold isotonic: calibrated on its own data within a few points
        assert calibration(p, y)["ece"] < 0.1, kind


def test_similar_photos_share_a_consensus_noun(split):
    data, _ = split
    nouns = consensus_nouns(data)
    assert len(nouns) == 20 and any(nouns)
    assert all(isinstance(w, str) for n in nouns for w in n)
    pools = {"image-image": Pool()}
    similar_pool(data, pools, top=5)
    x, _, g, _ = pools["image-image"].arrays()
    assert x.shape == (100, len(FEATURES)) and len(set(g.tolist())) == 20
    # a photo never finds itself: each one's hits are the best of the other photos
    scores = data.photos @ data.photos.T
    for group, i in zip(dict.fromkeys(g.tolist()), range(20), strict=True):
        others = np.sort(np.delete(scores[i], i))[::-1][:5]
        np.testing.assert_allclose(x[g == group, FEATURES.index("score")], others, rtol=1e-6)


def test_concept_queries_are_asked_with_and_without_their_photos(split, parser):
    data, model = split
    runs = concept_runs(
        data, model.embed_sentences, parser.parse, top=5, concepts={"dog": ("dog", "dogs")}
    )
    assert runs, "the first 20 test photos hold dogs"
    for r in runs:
        assert not set(r.absent_idx.tolist()) & {int(i) for i in r.relevant}
        assert r.present_scores[0] >= r.absent_scores[0]
    kinds = fit({"text-image": _caption_pool(data)}, {})
    relevance = RelevanceModel(kinds, 0.5, {}, top=5)
    figures = no_match_figures(runs, relevance, 0.0)
    assert figures["no_match_share"] == 0.0 and figures["kept_share"] == 1.0
    figures = no_match_figures(runs, relevance, 1.01)
    assert figures["no_match_share"] == 1.0 and figures["kept_share"] == 0.0


def test_the_protocol_counts_a_concepts_kinds_as_showing_it():
    assert "jeep" in CONCEPTS["car"] and "jeep" not in FORMS_ONLY["car"]
    assert set(CONCEPTS) == set(FORMS_ONLY)
    for name, forms in FORMS_ONLY.items():
        assert CONCEPTS[name][: len(forms)] == forms


def _caption_pool(data: SplitData) -> Pool:
    pools = {"text-image": Pool(), "image-caption": Pool()}
    caption_pools(data, pools, top=5)
    return pools["text-image"]


def test_a_caption_fits_the_photos_holding_its_subject_and_half_its_nouns(split):
    data, _ = split
    relevant = caption_photo_relevant(data)
    consensus, main = consensus_nouns(data), main_nouns(data)
    own = data.caption_image
    assert relevant.shape == (100, 20)
    assert relevant[np.arange(100), own].all()  # its own photo always
    assert 1.0 < relevant.sum(axis=1).mean() < 20.0  # more than its own, not everything
    for c in range(100):
        assert main[c] <= consensus[int(own[c])]
        subject = subject_noun(data.trees[c], main[c])
        assert (subject is None) == (not main[c])
        for j in np.flatnonzero(relevant[c]):
            if j != own[c]:
                assert subject in consensus[j]
                assert 2 * len(main[c] & consensus[j]) >= len(main[c])
        for j in np.flatnonzero(~relevant[c]):
            assert subject not in consensus[j] or 2 * len(main[c] & consensus[j]) < len(main[c])


def test_caption_checks_find_the_own_photo_and_drive_the_threshold(split, parser):
    data, model = split
    pools = {k: Pool() for k in ("text-image", "image-caption")}
    checks = caption_pools(data, pools, top=10)
    assert checks.scores.shape == (100, 10) and checks.own_rank.shape == (100,)
    own = data.caption_image
    ranks = np.argsort(-(data.captions @ data.photos.T), axis=1, kind="stable")
    for c in range(100):
        r = int(checks.own_rank[c])
        assert r == -1 or ranks[c, r] == own[c]
    runs = concept_runs(
        data, model.embed_sentences, parser.parse, top=10, concepts={"dog": ("dog", "dogs")}
    )
    relevance = RelevanceModel(fit({"text-image": pools["text-image"]}, {}), 0.5, {}, top=10)
    p = caption_relevance(checks, relevance)
    assert p.shape == (100, 10) and np.all(np.diff(p, axis=1) <= 1e-12)  # never rises
    t = choose_threshold(runs, relevance, checks)
    assert caption_figures(checks, p, t)["own_kept_share"] >= 0.9
    assert t >= choose_threshold(runs, relevance, checks, keep_captions=1.0)
    assert t <= choose_threshold(runs, relevance, None)
    # the everyday words the photos hold keep their relevant hits too
    everyday = everyday_runs(data, model.embed_sentences, parser.parse, top=10)
    words = {r.query.concept for r in everyday}
    assert "dog" in words and "giraffe" not in words
    assert all(len(r.relevant) >= PRESENT and r.single for r in everyday)
    with_words = choose_threshold(runs, relevance, checks, everyday=everyday)
    assert with_words <= t
    assert no_match_figures(everyday, relevance, with_words)["kept_share"] >= 0.9
    strict = choose_threshold(runs, relevance, checks, keep=1.0, everyday=everyday)
    assert no_match_figures(everyday, relevance, strict)["kept_share"] == 1.0
    # a word whose one relevant hit scores far below its others keeps it only up to
    # that hit's relevance: it binds the threshold there
    free = choose_threshold(runs, relevance, None)
    word = everyday[0]
    scores = word.present_scores.copy()
    scores[4:] = scores[4] - 1.0
    alone = [replace(word, present_scores=scores, relevant=frozenset({int(word.present_idx[4])}))]
    ceiling = float(alone[0].judge(relevance)[4])
    assert 0.0 < ceiling < free
    bound = choose_threshold(runs, relevance, None, everyday=alone)
    assert bound <= ceiling < bound + 0.005
    # a rule with nothing to keep is skipped, not read as failing everywhere
    nowhere = [replace(word, relevant=frozenset({-1}))]
    assert idle_rules(runs, None, nowhere) == ["everyday"]
    assert choose_threshold(runs, relevance, None, everyday=nowhere) == choose_threshold(
        runs, relevance, None
    )
    none_kept = [replace(r, relevant=frozenset({-1})) for r in runs]
    assert idle_rules(none_kept, checks) == ["concepts"]
    assert choose_threshold(none_kept, relevance, checks) == choose_threshold([], relevance, checks)
    with pytest.raises(DatasetError, match="no threshold can be chosen"):
        choose_threshold(none_kept, relevance, None, everyday=nowhere)


@pytest.mark.slow
def test_on_the_flickr8k_test_gallery_a_sentence_keeps_its_hits_and_a_giraffe_none(parser):
    """The shipped relevance on the 1,000 Flickr8k test photos (features from the cache,
    scored as ``/search`` scores them, with the shipped hubness correction): an ordinary
    caption-like sentence keeps its top five in ``results`` at the default, a concept the
    gallery lacks has none there."""
    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.hubness import load_hubness
    from groundsearch.model.runtime.images.features import FeatureExtractor
    from groundsearch.model.runtime.relevance import load_relevance, novelty_of, word_count
    from tests.tiny_data import FLICKR

    s = get_settings()
    if not (FLICKR / "Flickr_8k.testImages.txt").exists():
        pytest.skip("Flickr8k is not in the data folder")
    relevance = load_relevance(
        s.model_dir / "relevance.json", checkpoint_identity(s.default_checkpoint)
    )
    model = load_checkpoint(s.default_checkpoint, parser=parser.version)
    ds = load_captioned_images(FLICKR, split="test")
    extractor = FeatureExtractor(model.backbone, cache_dir=s.cache_dir)
    photos = model.embed_images(
        extractor.embed_files([ds.image_path(i) for i in range(len(ds.images))])
    )
    hub = load_hubness(s.model_dir / "hubness.npz", checkpoint_identity(s.default_checkpoint))
    penalties = hub.photo_penalties(photos)
    for text, matched in (("a black dog runs on the beach", True), ("a giraffe", False)):
        q = model.embed_sentences(parser.parse([text]))[0]
        scores = photos @ q - penalties  # as /search ranks
        _, top = top_of(scores[None, :], relevance.top)
        p = relevance.predict(
            "text-image", top[0], novelty_of(q, model.channel_columns), word_count(text)
        )
        assert bool(np.all(p[:5] >= relevance.threshold)) is matched, (text, p[:5])
        assert bool(np.any(p[:5] >= relevance.threshold)) is matched, (text, p[:5])


def test_caption_hits_carry_their_evidence_when_the_caption_names_a_thing(split):
    data, _ = split
    pools = {k: Pool() for k in ("text-image", "image-caption")}
    checks = caption_pools(data, pools, top=10)
    pool = pools["text-image"]
    named = [e is not None for e in checks.evidence]
    assert 20 < sum(named) < 100  # dogs, balls, beaches … but not "a man in a red shirt"
    for tree, e in zip(data.trees, checks.evidence, strict=True):
        assert (e is None) == (not data.nouns.nouns(tree))
    has = pool.has_evidence()
    assert has.sum() == 10 * sum(named)
    x, _, _, _ = pool.arrays(named=True)
    assert x.shape[0] == has.sum()
    ev = x[:, FEATURES.index("evidence")]
    assert np.all((ev >= 0) & (ev <= 1)) and ev.max() > 0.5  # the classifier sees dogs
    plain, _, _, _ = pool.arrays()
    assert np.all(plain[~has, FEATURES.index("evidence")] == 0)
    # the same split without classes: no evidence anywhere
    bare = SplitData(data.ds, data.trees, data.photos, data.captions, data.channel_columns)
    pools = {k: Pool() for k in ("text-image", "image-caption")}
    assert all(e is None for e in caption_pools(bare, pools, top=10).evidence)
    assert not pools["text-image"].has_evidence().any()


def test_evidence_models_are_fitted_on_the_named_queries_and_rise_with_evidence(split, parser):
    data, model = split
    pools = {k: Pool() for k in ("text-image", "image-caption")}
    checks = caption_pools(data, pools, top=10)
    runs = concept_runs(
        data, model.embed_sentences, parser.parse, top=10, concepts={"dog": ("dog", "dogs")}
    )
    for r in runs:
        assert r.present_evidence is not None and r.absent_evidence is not None
        assert r.present_evidence.shape == r.present_scores.shape
    kinds = fit(pools, {})
    full, small = fit_evidence(pools, {})
    assert set(full) == set(small) == {"text-image"}
    assert full["text-image"].features == EVIDENCE_FEATURES["text-image"]
    assert small["text-image"].features == EVIDENCE_SMALL_FEATURES["text-image"]
    for m in (full["text-image"], small["text-image"]):
        assert m.coef[m.features.index("log_evidence")] > 0
    x, y, _, _ = pools["text-image"].arrays(named=True)
    p = full["text-image"].predict(x)
    assert p[y == 1].mean() > p[y == 0].mean() + 0.1
    plain = RelevanceModel(kinds, 0.5, {}, top=10)
    judged = RelevanceModel(kinds, 0.5, {}, top=10, evidence=full, evidence_small=small)
    # captions without evidence are judged alike; the dog query differently
    both = caption_relevance(checks, plain), caption_relevance(checks, judged)
    unnamed = [i for i, e in enumerate(checks.evidence) if e is None]
    np.testing.assert_array_equal(both[0][unnamed], both[1][unnamed])
    dog = runs[0]
    assert not np.array_equal(dog.judge(plain), dog.judge(judged))
    assert np.all(np.diff(dog.judge(plain)) <= 1e-12)
    t = choose_threshold(runs, judged, checks)
    assert 0.0 <= t < 1.0
    concept_pool(runs, pools)
    figures = measure({**pools, "image-image": Pool(), "arithmetic": Pool()}, runs, judged, checks)
    assert figures["no_match"]["per_query"][0]["evidence"] is True


@pytest.fixture(scope="module")
def web_split(parser, tmp_path_factory) -> SplitData:
    """30 cc-web dev photos (one alt-text each, as features) embedded by the shipped model."""
    from groundsearch.model.data.sources import load_source, parse_source
    from tests.tiny_data import make_tiny_features

    root = make_tiny_features(tmp_path_factory.mktemp("web"), train=1, dev=30)
    ds = load_source(parse_source(str(root), get_settings().data_dir), "dev")
    model = load_checkpoint(get_settings().default_checkpoint, parser=parser.version)
    trees = parser.parse(list(ds.captions))
    photos = model.embed_images(ds.features)
    return SplitData(ds, trees, photos, model.embed_sentences(trees), model.channel_columns)


def test_a_one_caption_photo_has_the_nouns_of_its_caption(web_split):
    consensus = consensus_nouns(web_split)
    nouns = [{n.lemma.lower() for n in t if n.upos in ("NOUN", "PROPN")} for t in web_split.trees]
    assert [set(c) for c in consensus] == nouns  # not "three of five": all of its one
    assert any(consensus)


def test_two_collections_pool_their_queries_each_within_its_own(split, web_split, parser):
    from groundsearch.model.training.relevance import gather, gather_all

    data, model = split
    both = gather_all([data, web_split], model.embed_sentences, parser.parse, top=10)
    alone = [gather(d, model.embed_sentences, parser.parse, top=10) for d in (data, web_split)]
    pools, runs, checks = both
    for kind, pool in pools.items():
        assert pool.queries == sum(a[0][kind].queries for a in alone)
        _, y, groups, _ = pool.arrays()
        assert len(np.unique(groups)) == pool.queries  # every query its own group
        assert len(y) == sum(len(a[0][kind].arrays()[1]) for a in alone)
    assert len(runs) == sum(len(a[1]) for a in alone)
    assert len(checks.own_rank) == len(data.ds.captions) + len(web_split.ds.captions)
    # the web photos' own ranks are ranks among the web photos
    np.testing.assert_array_equal(checks.own_rank[-30:], alone[1][2].own_rank)
