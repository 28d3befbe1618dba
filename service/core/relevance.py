"""Each hit's relevance (``model.runtime.relevance``) as the service serves it.

A capability fetches at least the model's ``top`` hits and keeps the first ``k``; a route
splits them at ``min_relevance`` into ``results`` and ``weak``. The relevance file
(``GROUNDSEARCH_RELEVANCE``) must be fitted for the served checkpoint; without one every
relevance is null. **Evidence** (text → photo): a query with a noun the classes name or the
vector tagger tags is judged by the evidence model, from each photo's stored top classes
and vector (``ClassesKept`` asks each minute whether every photo's are stored).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from groundsearch.index.errors import UnknownItemError
from groundsearch.index.gallery import Gallery
from groundsearch.model.runtime.evidence import FILE_NAME as NOUNS_FILE_NAME
from groundsearch.model.runtime.evidence import (
    NounClasses,
    NounWords,
    evidence_channels,
    evidence_nouns,
    joined,
)
from groundsearch.model.runtime.relevance import (
    RelevanceError,
    RelevanceModel,
    load_relevance,
    novelty_of,
    word_count,
)
from groundsearch.model.runtime.tagger import (
    VECTORS_FILE_NAME,
    TaggerError,
    WordTagger,
    row_products,
    vectors_identity,
)
from groundsearch.service.core.settings import ServiceSettings

log = logging.getLogger(__name__)
T = TypeVar("T")


def served_relevance(
    settings: ServiceSettings, identity: dict[str, str]
) -> tuple[RelevanceModel | None, str]:
    """The relevance model and a line for ``/ready``."""
    path = relevance_path(settings)
    if path is None:
        return None, "none"
    default = settings.relevance == "default"
    if default and not path.exists():
        return None, "none (no shipped relevance model)"
    try:
        model = load_relevance(path, identity)
    except RelevanceError as exc:
        if not default:
            raise
        log.warning("relevance off: %s", exc)
        return None, "off: the shipped relevance model was fitted for another checkpoint"
    return model, f"{path.name} (default min_relevance {model.threshold:g})"


def relevance_path(settings: ServiceSettings) -> Path | None:
    """The relevance file the settings name (None: 'none')."""
    if settings.relevance == "none":
        return None
    if settings.relevance == "default":
        return settings.space_dir / "relevance.json"
    return Path(settings.relevance)


def served_tagger(
    settings: ServiceSettings, identity: dict[str, str], relevance: RelevanceModel | None
) -> WordTagger | None:
    """The vector tagger beside the relevance file (``make refit`` writes both into its
    OUT), else the model directory's, when evidence is served and it fits the checkpoint."""
    path = relevance_path(settings)
    if relevance is None or path is None or "text-image" not in (relevance.evidence or {}):
        return None
    try:
        return WordTagger.load(
            settings.companion(path, VECTORS_FILE_NAME), backbone=vectors_identity(identity)
        )
    except TaggerError as exc:
        log.warning("relevance without evidence: %s", exc)
        return None


#: (hit photo ids, weights: rows × d) → their vectors' inner products (hits × rows).
PhotoProducts = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: Hit photos' stored classes, in order (``Gallery.image_classes``: ids, probabilities).
ClassesFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Judge:
    """The served relevance model (or None) and, for evidence, the tagger, the noun →
    classes table and how to read hit photos' vectors' products and stored classes."""

    model: RelevanceModel | None
    channel_columns: int = 0
    tagger: WordTagger | None = None
    products: PhotoProducts | None = None
    nouns: NounClasses | None = None
    classes: ClassesFn | None = None
    stores_classes: Callable[[], bool] | None = None

    def named(self, words: NounWords) -> list[str]:
        """A query's nouns with evidence ([]: judged without)."""
        if self.model is None or not self.model.evidence or self.products is None:
            return []
        table = None
        if self.nouns is not None and self.stores_classes is not None and self.stores_classes():
            table = self.nouns
        return evidence_nouns(words, table, self.tagger)

    def evidence(self, nouns: Sequence[str], ids: Sequence[int] | np.ndarray) -> np.ndarray | None:
        """Each hit photo's evidence for ``nouns`` (NaN: none known; None without)."""
        return joined(*self.channels(nouns, ids))

    def channels(
        self, nouns: Sequence[str], ids: Sequence[int] | np.ndarray
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Each hit photo's evidence for ``nouns`` from the classifier's stored classes and
        from the tagger (``evidence_channels``; None for a channel without)."""
        ids = np.asarray(ids, np.int64)
        products = self.products
        if not nouns or products is None or not ids.size:
            return None, None
        classes = None
        if self.nouns is not None and self.classes is not None and self.nouns.nameable(nouns):
            classes = self.classes(ids)
        return evidence_channels(
            nouns, self.nouns, classes, self.tagger, lambda weights: products(ids, weights)
        )

    def fetch(self, k: int) -> int:
        """How many hits to fetch for ``k``: enough for the score distribution."""
        return max(k, self.model.top) if self.model is not None else k

    def of(self, kind: str, scores: Sequence[float]) -> list[float | None]:
        """``relevance`` of hits judged by their scores alone, as a list."""
        p = self.relevance(kind, scores)
        return [None] * len(scores) if p is None else p.tolist()

    def relevance(
        self,
        kind: str,
        scores: Sequence[float] | np.ndarray,
        vector: np.ndarray | None = None,
        text: str = "",
        evidence: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """The relevance of each of a query's hits (scores best first; None without a
        model), reading a text query's vector, text and its hits' ``evidence``."""
        if self.model is None or kind not in self.model.kinds:
            return None
        novelty = novelty_of(vector, self.channel_columns) if vector is not None else 0.0
        p = self.model.predict(kind, np.asarray(scores), novelty, word_count(text), evidence)
        return np.asarray(p, np.float64)

    def threshold(
        self, asked: float | None, evidence: bool = False, text: str = ""
    ) -> float | None:
        """The ``min_relevance`` applied: the one asked for, else the model's default."""
        if self.model is None:
            return None
        if asked is not None:
            return asked
        return self.model.default_threshold(evidence, word_count(text))


def split(
    items: Sequence[T], relevance: Sequence[float | None], threshold: float | None
) -> tuple[list[T], list[T]]:
    """``items`` at or above ``threshold`` and those below it, each in order."""
    below = [threshold is not None and r is not None and r < threshold for r in relevance]
    pairs = list(zip(items, below, strict=True))
    return [i for i, b in pairs if not b], [i for i, b in pairs if b]


def photo_products(gallery: Gallery) -> PhotoProducts:
    """Hit photos' vectors' inner products with rows of weights (a photo removed since
    it was ranked: a zero vector)."""

    def products(ids: np.ndarray, weights: np.ndarray) -> np.ndarray:
        try:
            return gallery.image_products(ids, weights)
        except UnknownItemError:
            rows = []
            for i in ids:
                try:
                    rows.append(gallery.image_vector(int(i)))
                except UnknownItemError:
                    rows.append(np.zeros(gallery.dim, np.float32))
            return row_products(np.stack(rows), weights)

    return products


def serving_judge(
    settings: ServiceSettings,
    identity: dict[str, str],
    relevance: RelevanceModel | None,
    model: object,
    gallery: Gallery,
) -> Judge:
    """The judge a server (or a local search) uses."""
    tagger = served_tagger(settings, identity, relevance)
    products = photo_products(gallery)
    columns = int(getattr(model, "channel_columns", 0))
    if relevance is None or not relevance.evidence:
        return Judge(relevance, columns)
    # the classifier's evidence where the served model stores classes with each photo
    table = served_nouns(settings) if getattr(model, "concepts", None) is not None else None
    if table is None:
        return Judge(relevance, columns, tagger, products)
    kept = ClassesKept(gallery.stores_classes)
    if not kept():
        log.warning(
            "not every gallery photo's classes are stored (indexed before they were kept): "
            "relevance reads the tagger's evidence only; `groundsearch index` over its "
            "folders again stores them (each photo's vector stays)"
        )
    return Judge(relevance, columns, tagger, products, table, gallery.image_classes, kept)


class ClassesKept:
    """Whether every photo's classes are stored, asked every ``every`` seconds."""

    def __init__(self, check: Callable[[], bool], every: float = 60.0) -> None:
        self.check, self.every = check, every
        self.known, self.asked = False, -math.inf

    def __call__(self) -> bool:
        now = time.monotonic()
        if not self.known and now - self.asked >= self.every:
            self.known, self.asked = self.check(), now
        return self.known


def served_nouns(settings: ServiceSettings) -> NounClasses | None:
    """The shipped noun → classes table (None when missing or unreadable)."""
    try:
        return NounClasses.load(settings.model_dir / NOUNS_FILE_NAME)
    except (OSError, ValueError) as exc:
        log.warning("relevance without the classifier's evidence: %s", exc)
        return None


#: No relevance model: every hit's relevance is null (capabilities built without one).
NO_JUDGE = Judge(None)
