"""A ranking (arrays) and its hits (the page's, as objects): from the search to the API."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

Item = TypeVar("Item")


@dataclass(slots=True)
class Hit(Generic[Item]):
    """A ranked id and its score, with its record (``item``), date and relevance."""

    id: int
    score: float
    item: Item | None = None
    taken_at: float | None = None
    relevance: float | None = None

    @property
    def record(self) -> Item:
        """The record this hit names (ValueError before it is read)."""
        if self.item is None:
            raise ValueError(f"hit {self.id}: its record was not read")
        return self.item


@dataclass(frozen=True, eq=False)
class Ranking:
    """A ranking's first hits as arrays, best first: ids, scores, when taken (NaN: unknown)
    and, for a fused ranking, the joint score its relevance reads."""

    ids: np.ndarray
    scores: np.ndarray
    taken_at: np.ndarray | None = None
    joint: np.ndarray | None = None

    @property
    def judged(self) -> np.ndarray:
        """The scores a relevance model reads: ``joint`` when given, else ``scores``."""
        return self.scores if self.joint is None else self.joint

    @classmethod
    def found(cls, scores: np.ndarray, ids: np.ndarray) -> Ranking:
        """The ranking of one row of a FAISS answer (ids of -1: none)."""
        kept = ids >= 0
        return cls(ids[kept].astype(np.int64), scores[kept].astype(np.float64))

    @classmethod
    def of(cls, pairs: Sequence[tuple[int, float]]) -> Ranking:
        """The ranking of (id, score) pairs, best first."""
        n = len(pairs)
        ids = np.fromiter((i for i, _ in pairs), np.int64, n)
        return cls(ids, np.fromiter((s for _, s in pairs), np.float64, n))

    def __len__(self) -> int:
        return int(self.ids.size)

    def pairs(self) -> list[tuple[int, float]]:
        """(id, score) of each hit, best first."""
        return list(zip(self.ids.tolist(), self.scores.tolist(), strict=True))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ranking) and self.pairs() == other.pairs()

    __hash__ = None  # type: ignore[assignment]
