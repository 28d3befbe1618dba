"""The object detector as relevance evidence (bench/detector/, measured and not shipped):
its kinds as stored classes, the noun → kinds table as class ids, and the relevance
commands' splits with it."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from groundsearch.cli import build_parser
from groundsearch.cli import relevance as cli
from groundsearch.cli.common import CliError
from groundsearch.model.runtime.evidence import NounClasses
from tests.bench import BENCH, load_script

sys.path.insert(0, str(BENCH))
from detector import relevance
from detector.evidence import (
    OFFSET,
    ObjectNounClasses,
    object_classes,
    objects_path,
    photo_objects,
    read_objects,
)

from groundsearch.model.runtime.objects.detector import COCO

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


def test_the_table_names_kinds_by_everyday_nouns():
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
    merged = ObjectNounClasses.merged(plain, objects_path())
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


def test_the_bench_runs_the_relevance_commands_never_over_the_shipped_file():
    script = load_script("object_detector")
    # the relevance commands with their own options; --objects is not groundsearch's
    args = script.build_parser().parse_args(["fit-relevance", "--nouns", "none"])
    assert args.func is cli.cmd_fit_relevance and args.nouns == "none"
    with pytest.raises(CliError, match="--out is required"):
        script.run(args)  # never over the shipped relevance.json
    assert script.build_parser().parse_args(["evaluate-relevance"]).func is (
        cli.cmd_evaluate_relevance
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fit-relevance", "--objects"])


def test_the_relevance_splits_hold_the_detectors_kinds(tmp_path, monkeypatch):
    plain = NounClasses.load()
    top = (np.array([[1, 2], [3, 4]]), np.array([[0.6, 0.4], [0.7, 0.3]], np.float32))
    scores = np.zeros((2, len(COCO)), np.float32)
    scores[:, COCO.index("horse")] = [0.9, 0.1]
    photos = [tmp_path / "a.jpg", tmp_path / "b.jpg"]

    def embedded(args, split, source):
        ds = SimpleNamespace(image_paths=lambda: photos, features=None)
        nouns = None if args.nouns == "none" else plain
        return "model", SimpleNamespace(ds=ds, classes=top if nouns else None, nouns=nouns), "p"

    class Detector:
        def score_files(self, paths, progress=False):
            assert paths == photos
            return scores

    loaded = []
    monkeypatch.setattr(relevance, "EMBEDDED_SPLIT", embedded)
    monkeypatch.setattr(
        relevance.ObjectDetector,
        "load",
        classmethod(lambda c, *a, **kw: loaded.append(a) or Detector()),
    )
    with relevance.detector_splits():
        assert cli.embedded_split is relevance.detector_split
        model, data, parse = cli.embedded_split(SimpleNamespace(nouns=None), "test", None)
    assert cli.embedded_split is not relevance.detector_split  # restored
    assert (model, parse) == ("model", "p") and len(loaded) == 1
    assert isinstance(data.nouns, ObjectNounClasses) and HORSE in data.nouns.classes["pony"]
    assert data.classes[0].shape == (2, 2 + 10) and data.classes[0][0, 2] == HORSE
    np.testing.assert_allclose(data.nouns.evidence(["pony"], *data.classes), [0.9, 0.1])
    # without the classifier's evidence (--nouns none) the detector is not run
    _, data, _ = relevance.detector_split(SimpleNamespace(nouns="none"), "test", None)
    assert data.classes is None and data.nouns is None and len(loaded) == 1
