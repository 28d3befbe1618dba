"""Each photo's object detector scores: stored once beside its records, read in any order
(NaN for a photo without), and filled by the detection pass for every photo lacking them,
an unreadable file left for the next pass."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.objects import detect_objects, store_objects
from groundsearch.index.store.records import lacking_objects, objects_of
from groundsearch.model.runtime.objects.detector import COCO, ObjectDetector, installed
from tests.index.synthetic import DIM, ID, vecs
from tests.tiny_data import FLICKR

HORSE = FLICKR / "Images" / "124195430_d14028660f.jpg"  # "A brown horse and a black foal …"


def test_scores_are_stored_once_and_read_in_order(tmp_path):
    g = Gallery.create(tmp_path / "g", DIM, ID)
    v = vecs(3)
    ids = [g.writes.add_photo(bytes([i]), "jpg", v[i])[0] for i in range(3)]
    db = g.records.reader()
    assert np.isnan(objects_of(db, ids, len(COCO))).all()  # no table yet: none stored
    assert [i for i, _ in lacking_objects(db, g.folder)] == ids
    scores = np.linspace(0, 1, len(COCO), dtype=np.float32)
    assert store_objects(g, {ids[1]: scores, 999: scores}) == 1  # a photo gone: left out
    read = objects_of(g.records.reader(), [ids[2], ids[1]], len(COCO))
    assert np.isnan(read[0]).all()
    np.testing.assert_allclose(read[1], scores, atol=1e-3)  # float16
    lacking = lacking_objects(g.records.reader(), g.folder)
    assert [i for i, _ in lacking] == [ids[0], ids[2]]
    assert lacking[0][1] == g.photo_path(ids[0])  # an upload's file, in the gallery folder
    g.writes.remove_photo(ids[1])
    assert np.isnan(objects_of(g.records.reader(), [ids[1]], len(COCO))).all()
    g.close()


@pytest.mark.skipif(
    not installed(get_settings().objects_dir) or not HORSE.is_file(),
    reason="the detector is not installed (groundsearch fetch-objects) or no Flickr8k photo",
)
def test_the_pass_detects_every_photo_lacking_scores_and_skips_an_unreadable_one(tmp_path):
    g = Gallery.create(tmp_path / "g", DIM, ID)
    v = vecs(2)
    horse = g.writes.add_photo(HORSE.read_bytes(), "jpg", v[0])[0]
    broken = g.writes.add_photo(b"not a photo", "jpg", v[1])[0]
    detector = ObjectDetector.load(get_settings().objects_dir, tmp_path / "cache")
    assert detect_objects(g, detector) == 1
    read = objects_of(g.records.reader(), [horse, broken], len(COCO))
    assert COCO[int(np.argmax(read[0]))] == "horse" and np.isnan(read[1]).all()
    assert [i for i, _ in lacking_objects(g.records.reader(), g.folder)] == [broken]
    assert detect_objects(g, detector) == 0  # the unreadable one again, still unreadable
    g.close()
