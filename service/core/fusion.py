"""The served short-query fusion (``model.runtime.fusion``).

The file is ``fusion.json`` beside the relevance file, else the model directory's
(``GROUNDSEARCH_FUSION``: ``default``, ``none`` or a file), served only for the checkpoint
it was chosen for, with the evidence the relevance reads and, where the gallery stores
them, each photo's object detector scores. A hit's relevance still reads its joint score
(``Ranking.joint``). The fused candidates are a ranking's first ``WINDOW`` photos (the
page's window); photos past it keep their order below them, so every page of a query
reads the same scores.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from groundsearch.index.gallery import Gallery
from groundsearch.index.hits import Ranking
from groundsearch.index.ranking.pages import WINDOW
from groundsearch.index.store.records import objects_of
from groundsearch.model.runtime.evidence import NounWords
from groundsearch.model.runtime.fusion import CHANNELS, FILE_NAME, Fusion, FusionError, load_fusion
from groundsearch.model.runtime.objects.detector import COCO
from groundsearch.model.runtime.objects.nouns import FILE_NAME as OBJECTS_FILE
from groundsearch.model.runtime.objects.nouns import NounObjects
from groundsearch.service.core.relevance import Judge
from groundsearch.service.core.settings import ServiceSettings

log = logging.getLogger(__name__)


def served_fusion(
    settings: ServiceSettings, identity: dict[str, str], judge: Judge, relevance_file: Path | None
) -> tuple[Fusion | None, str]:
    """The fusion served (None: joint scores alone) and a line for ``/ready``; a file
    named by the settings that cannot be served raises FusionError."""
    path = settings.beside_relevance("fusion", relevance_file, FILE_NAME)
    if path is None:
        return None, "none"
    default = settings.fusion == "default"
    if default and not path.exists():
        return None, "none (no fusion file)"
    try:
        fusion = load_fusion(path, identity)
        if judge.tagger is None and judge.nouns is None:
            raise FusionError("no evidence is served (the relevance model reads none)")
    except FusionError as exc:
        if not default:
            raise
        log.warning("short-query fusion off: %s", exc)
        return None, f"off: {exc}"
    lengths = "; ".join(
        f"{n} word{'s' * (n > 1)}: "
        + ", ".join(f"{k} {w:g}" for k, w in zip(CHANNELS, ws, strict=True))
        for n, ws in enumerate(fusion.weights, 1)
        if any(ws)
    )
    return fusion, f"{path.name} ({lengths or 'no query fused'})"


def served_objects(settings: ServiceSettings, gallery: Gallery) -> PhotoObjects | None:
    """The gallery's stored object scores read through the served noun → kinds table
    (None, logged, when the table is missing or unreadable)."""
    try:
        return PhotoObjects(NounObjects.load(settings.model_dir / OBJECTS_FILE), gallery)
    except (OSError, ValueError) as exc:
        log.warning("short queries ranked without the object detector's evidence: %s", exc)
        return None


class PhotoObjects:
    """Hit photos' stored object detector scores read for a query's nouns (``kinds``);
    a photo's row, once stored, is kept in memory (its scores never change)."""

    def __init__(self, kinds: NounObjects, gallery: Gallery) -> None:
        self.kinds, self.gallery = kinds, gallery
        #: the rows read so far; row 0 is NaN (a photo without), ``_row`` maps ids to rows
        self._scores = np.full((1, len(COCO)), np.nan, np.float32)
        self._row: dict[int, int] = {}

    def evidence(self, words: NounWords, ids: np.ndarray) -> np.ndarray | None:
        """Each photo's best score for the query's nouns (NaN: none stored; None: no noun
        names a kind)."""
        if not (named := self.kinds.named(words)):
            return None
        if missing := [int(i) for i in ids if int(i) not in self._row]:
            found = objects_of(self.gallery.records.reader(), missing, len(COCO))
            kept = np.isfinite(found).all(axis=1)
            start = len(self._scores)
            self._scores = np.vstack([self._scores, found[kept]])
            kept_ids = (i for i, k in zip(missing, kept, strict=True) if k)
            self._row.update((i, start + n) for n, i in enumerate(kept_ids))
        rows = np.fromiter((self._row.get(int(i), 0) for i in ids), np.int64, len(ids))
        return self.kinds.evidence(named, self._scores[rows])


@dataclass(frozen=True)
class Fuser:
    """A query's ranking fused with its hits' evidence (``judge.channels`` and, with
    ``objects``, the detector's)."""

    fusion: Fusion
    judge: Judge
    objects: PhotoObjects | None = None
    window: int = WINDOW

    def applies(self, content_words: int, nouns: Sequence[str], words: NounWords = ()) -> bool:
        named = self.objects.kinds.named(words) if self.objects is not None else []
        return self.fusion.applies(content_words, len(nouns) + len(named))

    def rank(
        self, ranking: Ranking, nouns: Sequence[str], words: int, noun_words: NounWords = ()
    ) -> Ranking:
        """``ranking`` (best first) of a query of ``words`` content words with its first
        ``window`` hits re-ranked by their fused scores, the rest after them in their order
        (scores shifted below); each hit's joint score kept for its relevance."""
        n = min(len(ranking), self.window)
        if n < 2:
            return ranking
        head = ranking.ids[:n]
        objects = None
        if self.objects is not None and self.fusion.weighs_objects(words):
            objects = self.objects.evidence(noun_words, head)
        channels = self.judge.channels(nouns, head)
        fused = self.fusion.fuse(ranking.scores[:n], *channels, words, objects)
        order = np.argsort(-fused, kind="stable")
        ids, scores, joint = head[order], fused[order], ranking.scores[:n][order]
        rest = ranking.scores[n:]
        if rest.size:  # below the window's last fused score, in their own order
            shifted = rest - rest[0] + min(float(scores[-1]), float(rest[0]))
            shifted = np.minimum(shifted, np.nextafter(scores[-1], -np.inf))
            ids = np.concatenate([ids, ranking.ids[n:]])
            scores = np.concatenate([scores, shifted])
            joint = np.concatenate([joint, rest])
        return Ranking(ids, scores, ranking.taken_at, joint)
