"""Each hit's relevance (``model.runtime.relevance``) as the service serves it.

The relevance model reads a query's top ``top`` scores (20), so a capability fetches at
least that many hits (``fetch``) and keeps the first ``k`` it fetched before: on an exact
(flat) index the first ``k`` of a longer list are the same hits, so relevance changes
neither the hits, nor their order, nor their scores. A route then splits the hits at
``min_relevance``: at or above it in ``results``, below it in ``weak`` (each list in the
ranking's order), and ``no_match`` when ``results`` is empty.

The shipped ``relevance.json`` is served when it was fitted for the served checkpoint
(``GROUNDSEARCH_RELEVANCE``: ``default``, ``none`` or a file, which must match); without
one every hit's relevance is null, every hit is in ``results``, and ``min_relevance`` is
read but changes nothing.

**Evidence** (``model.runtime.evidence``). A text query's hits may also be judged by
what the backbone's classifier saw on each hit photo: ``Judge.evidence`` turns the
query's nouns and the hits' top classes into each hit's evidence, which ``Judge.of``
passes on, and ``Judge.threshold(…, evidence=True)`` is the default threshold chosen for
that. A capability that passes none is judged exactly as without evidence models.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

from groundsearch.model.runtime.evidence import shipped as shipped_nouns
from groundsearch.model.runtime.relevance import (
    RelevanceError,
    RelevanceModel,
    load_relevance,
    novelty_of,
    word_count,
)
from groundsearch.service.settings import ServiceSettings

log = logging.getLogger(__name__)
T = TypeVar("T")


def served_relevance(
    settings: ServiceSettings, identity: dict[str, str]
) -> tuple[RelevanceModel | None, str]:
    """The relevance model and a line for ``/ready``. The shipped one is skipped when it
    was fitted for another checkpoint; a file named in the settings must match, or the
    server does not start."""
    if settings.relevance == "none":
        return None, "none"
    default = settings.relevance == "default"
    path = settings.model_dir / "relevance.json" if default else Path(settings.relevance)
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


@dataclass(frozen=True)
class Judge:
    """The served relevance model (or None) and how a text query's novelty is read."""

    model: RelevanceModel | None
    channel_columns: int = 0

    def fetch(self, k: int) -> int:
        """How many hits to fetch for ``k``: enough for the score distribution."""
        return max(k, self.model.top) if self.model is not None else k

    def of(
        self,
        kind: str,
        scores: Sequence[float],
        vector: np.ndarray | None = None,
        text: str = "",
        evidence: np.ndarray | None = None,
    ) -> list[float | None]:
        """The relevance of each of a query's hits (scores best first); a text query's
        vector (its novelty share) and text (its number of words) are features too, and
        each hit's ``evidence`` when given (``evidence``)."""
        if self.model is None or kind not in self.model.kinds:
            return [None] * len(scores)
        novelty = novelty_of(vector, self.channel_columns) if vector is not None else 0.0
        p = self.model.predict(kind, np.asarray(scores), novelty, word_count(text), evidence)
        return [float(x) for x in p]

    def evidence(
        self,
        kind: str,
        nouns: Sequence[str],
        class_ids: np.ndarray | None,
        class_probs: np.ndarray | None,
    ) -> np.ndarray | None:
        """Each hit's evidence for a query of ``kind`` with ``nouns`` (its parsed nouns'
        lemmas: ``NounClasses.nouns``), from the hits' top classes (hits × k ids and
        probabilities, best first, -1 for none: what ``top_classes`` gives), or None —
        no relevance model, no evidence model for the kind, no nameable noun, or the
        classes of a hit unknown (``class_ids`` None): the query is then judged as
        without evidence."""
        if self.model is None or kind not in (self.model.evidence or {}):
            return None
        if class_ids is None or class_probs is None:
            return None
        return shipped_nouns().evidence(nouns, class_ids, class_probs)

    def threshold(self, asked: float | None, evidence: bool = False) -> float | None:
        """The ``min_relevance`` applied: the one asked for, else the model's default
        (for queries judged with ``evidence``, the one chosen for them; None without a
        model)."""
        if self.model is None:
            return None
        return self.model.default_threshold(evidence) if asked is None else asked


def split(
    items: Sequence[T], relevance: Sequence[float | None], threshold: float | None
) -> tuple[list[T], list[T]]:
    """``items`` at or above ``threshold`` and those below it, each in order (all of
    them above when there is no threshold or no relevance)."""
    strong: list[T] = []
    weak: list[T] = []
    for item, r in zip(items, relevance, strict=True):
        (weak if threshold is not None and r is not None and r < threshold else strong).append(item)
    return strong, weak


#: No relevance model: every hit's relevance is null (capabilities built without one).
NO_JUDGE = Judge(None)
