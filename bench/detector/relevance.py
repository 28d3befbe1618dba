"""The relevance commands with the detector's evidence: a split embedded as
``groundsearch fit-relevance`` / ``evaluate-relevance`` embed it, with the COCO kinds the
detector finds appended to each photo's classes and the noun → kinds table merged into
the noun → classes table (``detector.evidence``).

    model, data, parse = detector_split(args, "test", source)   # as embedded_split
    with detector_splits():          # the relevance commands embed with the detector
        cmd_fit_relevance(args)
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

from detector.evidence import ObjectNounClasses, photo_objects
from groundsearch.cli import relevance
from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.objects.detector import ObjectDetector

#: The library's own embedding of a split (``detector_splits`` replaces it).
EMBEDDED_SPLIT = relevance.embedded_split


def detector_split(args: argparse.Namespace, split: str, source: Any) -> tuple[Any, Any, Any]:
    """``groundsearch.cli.relevance.embedded_split``, and where it read the classifier's
    evidence (the photos' top classes and a noun → classes table), the detector's too;
    ObjectsError when the detector is not installed."""
    model, data, parse = EMBEDDED_SPLIT(args, split, source)
    if data.classes is not None and data.nouns is not None and data.ds.features is None:
        data.nouns = ObjectNounClasses.merged(data.nouns)
        settings = get_settings()
        detector = ObjectDetector.load(settings.objects_dir, settings.cache_dir)
        scores = detector.score_files(data.ds.image_paths(), progress=True)
        data.classes = photo_objects(data.classes, scores)
    return model, data, parse


@contextmanager
def detector_splits() -> Iterator[None]:
    """While open, the relevance commands embed each split with ``detector_split``."""
    with mock.patch.object(relevance, "embedded_split", detector_split):
        yield
