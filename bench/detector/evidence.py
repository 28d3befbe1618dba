"""The object detector's evidence: COCO kinds beside a photo's ImageNet classes.

With the detector (``model.runtime.objects``) a photo's classes also hold the COCO kinds it
found, as ids ``OFFSET + k`` with the detector's score (``photo_objects``), and the
noun → kinds table ``noun_objects.tsv`` (``objects_path()``, the runtime's) names a
noun's kinds ("pony": horse). ``ObjectNounClasses`` is the library's ``NounClasses``
with that table merged in: a noun's evidence is the larger of its ImageNet classes'
summed probability and its kinds' best detector score — the classifier says what a photo
is of, the detector what is anywhere in it. Measured, not shipped (docs/RESULTS.md, "An
object detector's evidence"): the library's evidence reads ImageNet classes alone.

    table = ObjectNounClasses.merged(NounClasses.load())
    classes = photo_objects(top_classes(probabilities), detector.score_files(paths))
    evidence = table.evidence(["horse"], *classes)
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from groundsearch.model.runtime.evidence import NounClasses, default_path
from groundsearch.model.runtime.objects.detector import COCO

#: Stored object classes are ids OFFSET + k for COCO kind k (ImageNet's are 0 … 999).
OFFSET = 1000
#: A photo keeps at most this many kinds, those scoring at least ``FLOOR``.
OBJECT_CLASSES = 10
FLOOR = 0.05


def objects_path() -> Path:
    """The noun → COCO kinds table (``model/artifacts/noun_objects.tsv``)."""
    return default_path("noun_objects.tsv")


def object_classes(
    scores: np.ndarray, k: int = OBJECT_CLASSES, floor: float = FLOOR
) -> tuple[np.ndarray, np.ndarray]:
    """Each photo's kinds scoring at least ``floor``, best first, at most ``k``, and its
    best kind whatever its score (so a stored row shows the detector ran), as class ids
    (``OFFSET`` + kind) and scores: photos × k, padded with id -1 and score 0."""
    s = np.asarray(scores, np.float32).reshape(len(scores), -1)
    k = min(k, s.shape[1])
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    vals = np.take_along_axis(s, order, axis=1)
    keep = vals >= floor
    keep[:, 0] = True
    return np.where(keep, order + OFFSET, -1).astype(np.int64), np.where(keep, vals, 0.0).astype(
        np.float32
    )


def read_objects(path: Path) -> dict[str, frozenset[int]]:
    """A noun → COCO kinds table (columns noun, objects: kind names of ``COCO``, space
    separated), as class ids ``OFFSET`` + kind; ValueError naming a bad row."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader((ln for ln in f if not ln.startswith("#")), delimiter="\t"))
    if not rows or tuple(rows[0])[:2] != ("noun", "objects"):
        raise ValueError(f"{path}: expected the columns ('noun', 'objects') first")
    table: dict[str, frozenset[int]] = {}
    for r in rows:
        noun, kinds = r["noun"], (r["objects"] or "").split()
        unknown = [k for k in kinds if k not in COCO]
        if not noun.isalpha() or noun != noun.lower() or not kinds or unknown:
            raise ValueError(f"{path}: a row is a lower-case word and COCO kinds: {noun!r}")
        table[noun] = frozenset(OFFSET + COCO.index(k) for k in kinds)
    return table


def photo_objects(
    classes: tuple[np.ndarray, np.ndarray] | None, objects: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """Photos' top ImageNet classes with the COCO kinds the detector found appended
    (``object_classes`` of its scores: ids ``OFFSET`` + kind, -1 padding);
    ``classes`` alone without detector scores."""
    if classes is None or objects is None:
        return classes
    ids, probs = object_classes(objects)
    return np.hstack([classes[0], ids]), np.hstack([classes[1], probs])


class ObjectNounClasses(NounClasses):
    """Noun → ImageNet classes and COCO kinds (ids ``OFFSET`` + kind)."""

    @classmethod
    def merged(cls, table: NounClasses, objects: Path | None = None) -> ObjectNounClasses:
        """``table`` with the noun → COCO kinds table ``objects`` (default:
        ``objects_path()``) merged in; ValueError if it is malformed."""
        classes = dict(table.classes)
        for noun, kinds in read_objects(Path(objects) if objects else objects_path()).items():
            classes[noun] = classes.get(noun, frozenset()) | kinds
        return cls(classes)

    def evidence(
        self, nouns: Sequence[str], class_ids: np.ndarray, class_probs: np.ndarray
    ) -> np.ndarray | None:
        """Each hit's evidence (``max`` over the nameable ``nouns`` of the probability on
        that noun's ImageNet classes among the hit's top classes, or its COCO kinds' best
        detector score), from each hit's top class ids and probabilities (hits × k; an
        id of -1 is no class). NaN for a hit whose only nameable nouns are the
        detector's and whose row holds no detector kinds (indexed without it). None when
        no noun has classes: the query has no evidence."""
        named = self.nameable(nouns)
        if not named:
            return None
        ids = np.asarray(class_ids, np.int64)
        probs = np.asarray(class_probs, np.float64)
        if ids.shape != probs.shape or ids.ndim != 2:
            raise ValueError("class ids and probabilities must be two arrays of hits × k")
        out = np.full(ids.shape[0], np.nan)
        detected = ids >= OFFSET
        ran = detected.any(axis=1)  # the detector's kinds are stored for this photo
        for noun in named:
            classes = np.fromiter(self.classes[noun], np.int64)
            wanted = np.isin(ids, classes)
            imagenet = np.where(wanted & ~detected, probs, 0.0).sum(axis=1)
            found = np.where(wanted & detected, probs, 0.0).max(axis=1, initial=0.0)
            value = np.maximum(imagenet, found)
            if (classes >= OFFSET).all():  # a noun only the detector names: unknown without
                value = np.where(ran, value, np.nan)
            out = np.fmax(out, value)
        return np.clip(out, 0.0, 1.0)
