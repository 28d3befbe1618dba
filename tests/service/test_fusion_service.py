"""The served short-query fusion: a word or two ranked by its fused scores over the first
window of the joint ranking, a sentence left alone, relevance still reading the joint
score (shown never rising down the fused order), and which file is served."""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pytest

from groundsearch.index.hits import Ranking
from groundsearch.index.ranking.photo_pages import PageAsk
from groundsearch.model.runtime.fusion import FILE_NAME, Fusion, FusionError
from groundsearch.service.core.capabilities.search import Search
from groundsearch.service.core.fusion import Fuser, served_fusion
from groundsearch.service.core.relevance import NO_JUDGE
from groundsearch.service.core.settings import ServiceSettings


class Channels:
    """A judge whose evidence is given per photo id (classifier's only)."""

    def __init__(self, classes: dict[int, float]) -> None:
        self.classes = classes

    def channels(self, nouns, ids):
        return np.array([self.classes.get(int(i), 0.0) for i in ids]), None


def test_the_window_is_fused_and_the_rest_follows_below_in_its_order():
    ranking = Ranking(np.arange(6), np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4]))
    fuser = Fuser(Fusion(((2.0, 0.0, 0.0),)), Channels({3: 0.95, 5: 0.99}), window=4)  # type: ignore[arg-type]
    fused = fuser.rank(ranking, ["dog"], 1)
    assert fused.ids.tolist()[:4][0] == 3  # the dog of the window first
    assert sorted(fused.ids.tolist()[:4]) == [0, 1, 2, 3]
    assert fused.ids.tolist()[4:] == [4, 5]  # past the window: not lifted, in order
    assert np.all(np.diff(fused.scores) < 0)  # an order the pages can read
    want = dict(zip(ranking.ids.tolist(), ranking.scores.tolist(), strict=True))
    assert fused.judged.tolist() == [want[i] for i in fused.ids.tolist()]  # joint kept
    longer = fuser.rank(Ranking(np.arange(8), np.linspace(0.9, 0.2, 8)), ["dog"], 1)
    assert longer.ids.tolist()[:6] == fused.ids.tolist()  # the same first scores for
    assert np.allclose(longer.scores[:4], fused.scores[:4])  # any page's fetch
    one = Ranking(np.array([7]), np.array([0.3]))
    assert fuser.rank(one, ["dog"], 1) is one


@pytest.fixture()
def components(service_components):
    c = service_components
    assert c.fuser is not None, c.fusion_status  # the shipped fusion is served
    assert c.fusion_status.startswith("fusion.json (1 word: classes ")
    return c


def test_a_short_query_is_ranked_by_its_fused_scores(components):
    c = components
    penalties = c.hubness.photos if c.hubness else None
    plain = Search(c.queries, c.gallery, c.stages, c.judge, penalties)
    fused = replace(plain, fuser=c.fuser)
    ask = PageAsk(k=8)
    changed = 0
    for text in ("a dog", "dog", "grass", "a ball"):
        before, _, _ = plain.run(plain.clean(text), ask, min_relevance=0)
        after, _, _ = fused.run(fused.clean(text), ask, min_relevance=0)
        ids = np.array([h.id for h in before.hits])
        joint = np.array([h.score for h in before.hits])
        _, words, content = c.queries.vector_and_nouns(plain.clean(text), {})
        nouns = c.judge.named(words)
        want = c.fuser.fusion.fuse(joint, *c.judge.channels(nouns, ids), content)
        assert [h.id for h in after.hits] == ids[np.argsort(-want, kind="stable")].tolist()
        changed += [h.id for h in after.hits] != ids.tolist()
        assert np.allclose([h.score for h in after.hits], np.sort(want)[::-1])
        # relevance reads each hit's joint score (all 8 hits: the same features), shown
        # never rising down the fused order: the good matches are its first hits
        relevance = {h.id: h.relevance for h in before.hits}
        own = np.array([relevance[h.id] for h in after.hits])
        shown = np.array([h.relevance for h in after.hits])
        assert np.allclose(shown, np.maximum.accumulate(own[::-1])[::-1])
        assert shown.max() == pytest.approx(max(relevance.values()))  # "no match" the same
    assert changed  # the evidence moved photos


def test_a_sentence_is_not_fused(components):
    c = components
    plain = Search(c.queries, c.gallery, c.stages, c.judge, c.hubness.photos)
    fused = replace(plain, fuser=c.fuser)
    text = "a black dog runs through the grass with a ball in its mouth"
    before, _, _ = plain.run(plain.clean(text), PageAsk(k=8))
    after, _, _ = fused.run(fused.clean(text), PageAsk(k=8))
    assert [(h.id, h.score) for h in after.hits] == [(h.id, h.score) for h in before.hits]


@pytest.fixture()
def model_dir(tmp_path, service_components):
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(service_components.settings.model_dir / FILE_NAME, folder / FILE_NAME)
    return folder


def test_which_fusion_is_served(model_dir, service_components, tmp_path):
    c = service_components
    identity = dict(c.identity)
    settings = ServiceSettings(model_dir=model_dir)
    fusion, status = served_fusion(settings, identity, c.judge, None)
    assert fusion is not None and "2 words: classes " in status
    off = settings.model_copy(update={"fusion": "none"})
    assert served_fusion(off, identity, c.judge, None) == (None, "none")
    fusion, status = served_fusion(settings, {"checkpoint_sha256": "cd" * 32}, c.judge, None)
    assert fusion is None and "another checkpoint" in status
    fusion, status = served_fusion(settings, identity, NO_JUDGE, None)  # no evidence
    assert fusion is None and status.startswith("off: no evidence is served")
    named = settings.model_copy(update={"fusion": str(model_dir / FILE_NAME)})
    with pytest.raises(FusionError, match="another checkpoint"):
        served_fusion(named, {"checkpoint_sha256": "cd" * 32}, c.judge, None)
    beside = tmp_path / "refit"  # make refit's OUT: the file beside the relevance wins
    beside.mkdir()
    Fusion(((0.0, 1.0, 0.0),), identity).save(beside / FILE_NAME)
    fusion, status = served_fusion(settings, identity, c.judge, beside / "relevance.json")
    assert fusion is not None and fusion.weights == ((0.0, 1.0, 0.0),)
    (model_dir / FILE_NAME).unlink()
    assert served_fusion(settings, identity, c.judge, None) == (None, "none (no fusion file)")
    (model_dir / FILE_NAME).write_text("{broken")
    bad = settings.model_copy(update={"fusion": str(model_dir / FILE_NAME)})
    with pytest.raises(FusionError, match="cannot read fusion file"):
        served_fusion(bad, identity, c.judge, None)


def test_a_fused_query_pages_through_every_photo_once(components):
    c = components
    search = Search(c.queries, c.gallery, c.stages, c.judge, c.hubness.photos, c.fuser)
    cleaned = search.clean("a dog")
    whole, _, _ = search.run(cleaned, PageAsk(k=8), min_relevance=0)
    seen, cursor = [], None
    while True:
        page, _, _ = search.run(cleaned, PageAsk(k=3, cursor=cursor), min_relevance=0)
        seen += [h.id for h in page.hits]
        if page.next is None:
            break
        cursor = page.next
    assert seen == [h.id for h in whole.hits] and len(set(seen)) == c.gallery.counts()["images"]


def test_the_detectors_stored_scores_lift_the_photo_that_shows_the_thing(tmp_path):
    from groundsearch.index.gallery import Gallery
    from groundsearch.index.ingest.objects import store_objects
    from groundsearch.model.runtime.objects.detector import COCO
    from groundsearch.model.runtime.objects.nouns import NounObjects
    from groundsearch.service.core.fusion import PhotoObjects
    from tests.index.synthetic import DIM, ID, vecs

    g = Gallery.create(tmp_path / "g", DIM, ID)
    v = vecs(4)
    ids = [g.writes.add_photo(bytes([i]), "jpg", v[i])[0] for i in range(4)]
    dog = np.zeros(len(COCO), np.float32)
    dog[COCO.index("dog")] = 0.9
    store_objects(g, {ids[0]: np.zeros(len(COCO)), ids[2]: dog})  # 1 and 3: none stored
    objects = PhotoObjects(NounObjects.load(), g)
    fuser = Fuser(Fusion(((0.0, 0.0, 1.0),)), Channels({}), objects)  # type: ignore[arg-type]
    words = (("dog", "dog"),)
    assert fuser.applies(1, [], words) and not fuser.applies(1, [], (("grass", "grass"),))
    ranking = Ranking(np.array(ids), np.array([0.9, 0.8, 0.7, 0.6]))
    assert fuser.rank(ranking, [], 1, words).ids[0] == ids[2]  # the dog first
    assert fuser.rank(ranking, [], 1, (("grass", "grass"),)).ids.tolist() == ids  # no kind
    g.close()
