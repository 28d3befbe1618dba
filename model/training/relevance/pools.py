"""Hits of many queries of one kind pooled (``Pool``), and the relevance a model gives them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from groundsearch.model.runtime.relevance import FEATURES, RelevanceModel, features


@dataclass
class Pool:
    """Hits of many queries of one kind: features, labels, query ids, sources, evidence."""

    rows: list[np.ndarray] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    groups: list[np.ndarray] = field(default_factory=list)
    sources: list[np.ndarray] = field(default_factory=list)
    named: list[np.ndarray] = field(default_factory=list)
    queries: int = 0

    def add(
        self,
        scores: np.ndarray,
        relevant: np.ndarray,
        source: str,
        novelty: float = 0.0,
        words: int = 0,
        evidence: np.ndarray | None = None,
    ) -> None:
        """One query's hits: its top scores (best first), whether each is relevant, a
        text query's novelty and words, and each hit's evidence (None: none)."""
        self.rows.append(features(scores, novelty, words=words, evidence=evidence))
        self.labels.append(np.asarray(relevant, dtype=np.int8))
        self.groups.append(np.full(len(scores), self.queries))
        self.sources.append(np.full(len(scores), source))
        self.named.append(np.full(len(scores), evidence is not None))
        self.queries += 1

    def extend(self, other: Pool) -> None:
        """``other``'s hits after this pool's, its queries numbered after these."""
        self.rows += other.rows
        self.labels += other.labels
        self.groups += [g + self.queries for g in other.groups]
        self.sources += other.sources
        self.named += other.named
        self.queries += other.queries

    def arrays(
        self, sources: Sequence[str] | None = None, named: bool = False
    ) -> tuple[np.ndarray, ...]:
        """features, labels, groups, sources (of ``sources``' hits when given; of the
        queries with evidence when ``named``)."""
        x = np.concatenate(self.rows) if self.rows else np.zeros((0, len(FEATURES)))
        y, g, s, e = (
            np.concatenate(parts) if parts else np.zeros(0, kind)
            for parts, kind in (
                (self.labels, np.int8),
                (self.groups, int),
                (self.sources, str),
                (self.named, bool),
            )
        )
        keep = (e if named else np.ones(len(y), bool)) & self._of(s, sources)
        return x[keep], y[keep], g[keep], s[keep]

    @staticmethod
    def _of(s: np.ndarray, sources: Sequence[str] | None) -> np.ndarray:
        return np.ones(len(s), bool) if sources is None else np.isin(s, list(sources))

    def has_evidence(self, sources: Sequence[str] | None = None) -> np.ndarray:
        """Whether each hit (of ``sources`` when given) carries evidence."""
        e = np.concatenate(self.named) if self.named else np.zeros(0, bool)
        s = np.concatenate(self.sources) if self.sources else np.zeros(0, str)
        return e[self._of(s, sources)]


def predict_rows(model: RelevanceModel, kind: str, x: np.ndarray, named: np.ndarray) -> np.ndarray:
    """The relevance of rows ``x`` by the models for a full top (``named``: judged by evidence)."""
    p = np.zeros(len(x))
    for evidence, rows in ((False, ~named), (True, named)):
        if rows.any():
            p[rows] = model.model_for(kind, model.top, evidence).predict(x[rows])
    return p


def predict_pool(
    model: RelevanceModel, kind: str, pool: Pool, sources: Sequence[str] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, y, _, _ = pool.arrays(sources)
    p = predict_rows(model, kind, x, pool.has_evidence(sources))
    return p, y, x[:, FEATURES.index("score")]
