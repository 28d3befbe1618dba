"""The served hubness correction: penalties kept once computed, a long query's ranking
corrected and a short one's left, and which file is served with which relevance."""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest

from groundsearch.index.hits import Ranking
from groundsearch.index.ranking.photo_pages import PageAsk
from groundsearch.model.runtime.hubness import (
    CHUNK,
    FILE_NAME,
    HUBNESS_KEY,
    Hubness,
    HubnessError,
    Penalties,
    Penalty,
    file_digest,
    load_hubness,
)
from groundsearch.model.runtime.relevance import load_relevance
from groundsearch.service.core.capabilities.search import Search
from groundsearch.service.core.hubness import served_hubness
from groundsearch.service.core.settings import ServiceSettings

ID = {"checkpoint_sha256": "ab" * 32}


def test_penalties_are_computed_once_a_photo_and_re_rank_the_hits():
    rng = np.random.default_rng(0)
    vectors = {i: rng.normal(size=4) for i in (3, 5, 8)}
    bank = rng.normal(size=(20, 4)).astype(np.float32)
    asked: list[list[int]] = []

    def products(ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
        asked.append(ids.tolist())
        return np.stack([vectors[int(i)] for i in ids]) @ weights.T

    side = Penalty(bank, 4, 1.0)
    penalties = Penalties(side, products)
    expected = side(np.stack([vectors[i] for i in (5, 3)]))
    assert np.allclose(penalties(np.array([5, 3, 5])), expected[[0, 1, 0]], atol=1e-5)
    assert np.allclose(penalties(np.array([3, 8])[:1]), expected[1], atol=1e-5)
    penalties(np.array([8, 5]))
    assert asked == [[5, 3], [8]]  # each photo's products once
    ranking = Ranking(np.array([3, 5, 8]), np.array([0.9, 0.8, 0.7]))
    fixed = Ranking(*penalties.ranked(ranking.ids, ranking.scores))
    want = ranking.scores - penalties(ranking.ids)
    assert fixed.ids.tolist() == ranking.ids[np.argsort(-want, kind="stable")].tolist()
    assert np.allclose(fixed.scores, np.sort(want)[::-1])
    assert len(penalties.ranked(np.zeros(0, np.int64), np.zeros(0))[0]) == 0
    small = Penalties(side, products, kept=2)  # forgets all at once past ``kept``
    small(np.array([3, 5]))
    small(np.array([8]))
    assert asked[-2:] == [[3, 5], [8]] and len(small) == 1


def test_penalties_are_each_vectors_own_in_chunks_and_forgotten_past_kept():
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(1200, 8)).astype(np.float32)
    side = Penalty(rng.normal(size=(30, 8)).astype(np.float32), 5, 0.7)
    asked: list[list[int]] = []

    def products(ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
        asked.append(ids.tolist())
        return vectors[ids] @ weights.T

    penalties = Penalties(side, products, kept=1100)
    asks = [[5, 3, 5], [3, 8], [], [9, 1, 8, 2], list(range(39, 9, -1)), [5, 39, 0]]
    asks += [rng.permutation(1200)[:1050].tolist()]  # in chunks, then past ``kept``: forgotten
    asks += [rng.choice(1200, 300).tolist() for _ in range(3)]
    for ids in asks:
        ids = np.array(ids, np.int64)
        want = side.of_products(vectors[ids] @ side.bank.T) if ids.size else np.zeros(0)
        assert np.allclose(penalties(ids), want, atol=1e-6)
    assert all(len(part) <= CHUNK for part in asked) and [9, 1, 2] in asked  # new ones only
    assert len(penalties) <= 1100


def test_a_text_query_is_ranked_by_score_less_the_photos_penalties(service_components):
    c = service_components
    assert c.hubness is not None, c.hubness_status  # the shipped pair is served
    plain = Search(c.queries, c.gallery, c.stages)
    corrected = Search(c.queries, c.gallery, c.stages, penalties=c.hubness.photos)
    ask = PageAsk(k=8)
    for text in ("a dog runs through the grass with a ball", "a dog"):
        before, _, _ = plain.run(plain.clean(text), ask)
        after, _, _ = corrected.run(corrected.clean(text), ask)
        ids = np.array([h.id for h in before.hits])
        scores = np.array([h.score for h in before.hits])
        scores = scores - c.hubness.photos(ids)
        ids = ids[np.argsort(-scores, kind="stable")]
        scores = np.sort(scores)[::-1]
        assert [h.id for h in after.hits] == ids.tolist(), text
        assert np.allclose([h.score for h in after.hits], scores), text


@pytest.fixture()
def model_dir(tmp_path, service_components):
    """A model folder holding copies of the shipped relevance and hubness files."""
    shipped = service_components.settings.model_dir
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("relevance.json", FILE_NAME):
        shutil.copy(shipped / name, folder / name)
    return folder


def test_the_hubness_is_served_only_with_the_relevance_fitted_on_it(model_dir, tmp_path):
    identity = load_hubness(model_dir / FILE_NAME).identity
    relevance = load_relevance(model_dir / "relevance.json", identity)
    assert relevance.info[HUBNESS_KEY] == file_digest(model_dir / FILE_NAME)
    settings = ServiceSettings(model_dir=model_dir)
    hub, status = served_hubness(settings, dict(identity), relevance, None)
    assert hub is not None and status.startswith("hubness.npz (photos: k ")
    assert "captions: k " in status
    hub, status = served_hubness(settings, dict(identity), None, None)  # no relevance served
    assert hub is not None
    raw = replace(relevance, info={**relevance.info, HUBNESS_KEY: None})
    hub, status = served_hubness(settings, dict(identity), raw, None)
    assert hub is None and "fitted on raw scores" in status and "fit-relevance" in status
    hub, status = served_hubness(settings, {"checkpoint_sha256": "cd" * 32}, None, None)
    assert hub is None and "another checkpoint" in status
    named = settings.model_copy(update={"hubness": str(model_dir / FILE_NAME)})
    with pytest.raises(HubnessError, match="raw scores"):
        served_hubness(named, dict(identity), raw, None)
    assert (
        served_hubness(settings.model_copy(update={"hubness": "none"}), identity, None, None)[0]
        is None
    )
    (model_dir / FILE_NAME).unlink()
    assert served_hubness(settings, dict(identity), relevance, None) == (
        None,
        "none (no hubness file)",
    )
    beside = tmp_path / "refit"  # make refit's OUT: the file beside the relevance wins
    beside.mkdir()
    hub_file = beside / FILE_NAME
    Hubness(Penalty(np.ones((3, 114), np.float32), 2, 0.5), None, identity).save(hub_file)
    served, _ = served_hubness(settings, dict(identity), None, beside / "relevance.json")
    assert served is not None and served.photos.k == 2 and served.captions is None


def test_a_hubness_file_that_cannot_be_read_names_the_problem(model_dir):
    (model_dir / FILE_NAME).write_bytes(b"not a hubness file")
    settings = ServiceSettings(model_dir=model_dir, hubness=str(model_dir / FILE_NAME))
    with pytest.raises(HubnessError, match="cannot read hubness file"):
        served_hubness(settings, ID, None, None)
    default = ServiceSettings(model_dir=model_dir)
    hub, status = served_hubness(default, ID, None, None)
    assert hub is None and status.startswith("off: cannot read hubness file")


def test_a_photo_is_described_by_captions_ranked_by_score_less_their_penalty(
    service_components, gallery_photo
):
    from PIL import Image

    from groundsearch.service.core.capabilities.describe import Describe

    c = service_components
    assert c.hubness is not None and c.hubness.captions is not None
    plain = Describe(c.photos, c.queries, c.gallery, c.bank, c.captioner, c.stages)
    fixed = replace(plain, penalties=c.hubness.captions)
    image = Image.open(c.gallery.photo_path(gallery_photo))
    before, _, _, _ = plain.run(image, k=40)
    after, _, _, _ = fixed.run(image, k=40)
    raw = {d.id: d.score for d in before}
    assert {d.id for d in after} == set(raw)  # the gallery's 40 captions, re-ranked
    penalty = dict(zip(raw, c.hubness.captions(np.array(list(raw))), strict=True))
    assert [d.id for d in after] == sorted(raw, key=lambda i: -(raw[i] - penalty[i]))
    assert all(np.isclose(d.score, raw[d.id] - penalty[d.id]) for d in after)


@pytest.fixture(scope="module")
def gallery_photo(service_components) -> int:
    return service_components.gallery.image_ids()[0]


def test_the_caption_bank_ranks_by_score_less_penalty_exactly():
    from groundsearch.index.caption_bank import CaptionBank

    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(50, 8)).astype(np.float32)
    side = Penalty(rng.normal(size=(20, 8)).astype(np.float32), 4, 1.0)
    penalties = side(vectors)
    texts = [f"caption {i}" for i in range(50)]
    bank = CaptionBank("test", texts, vectors, side)
    query = rng.normal(size=8).astype(np.float32)
    fixed = vectors @ query - penalties
    hits = bank.search(query, 5)
    assert [t for t, _ in hits] == [texts[i] for i in np.argsort(-fixed)[:5]]
    assert np.allclose([s for _, s in hits], np.sort(fixed)[::-1][:5], atol=1e-5)
    raw = CaptionBank("test", texts, vectors).search(query, 5)
    assert [t for t, _ in raw] == [texts[i] for i in np.argsort(-(vectors @ query))[:5]]
    assert CaptionBank("empty", [], np.zeros((0, 8)), side).search(query, 3) == []


def test_a_relevance_fitted_on_corrected_scores_is_not_served_on_raw_ones(model_dir):
    from groundsearch.model.runtime.relevance import RelevanceError
    from groundsearch.service.core.hubness import relevance_on_raw

    identity = load_hubness(model_dir / FILE_NAME).identity
    relevance = load_relevance(model_dir / "relevance.json", identity)
    settings = ServiceSettings(model_dir=model_dir)
    hub, _ = served_hubness(settings, dict(identity), relevance, None)
    assert relevance_on_raw(settings, relevance, "served", hub) == (relevance, "served")
    off, status = relevance_on_raw(settings, relevance, "served", None)
    assert off is None and "hubness-corrected" in status
    raw = replace(relevance, info={**relevance.info, HUBNESS_KEY: None})
    assert relevance_on_raw(settings, raw, "served", None) == (raw, "served")
    named = settings.model_copy(update={"relevance": str(model_dir / "relevance.json")})
    with pytest.raises(RelevanceError, match="hubness-corrected"):
        relevance_on_raw(named, relevance, "served", None)
