"""The one hit type, from the gallery's search to the API's answer.

A ranking is read and judged as arrays (``pages.Ranking``); the hits a page shows become
``Hit`` objects with what the stages learnt of them — when the photo was taken (a date
order), its relevance (the judgement), the record it names — so a hit is one thing
wherever it is read, from the page to the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")


@dataclass(slots=True)
class Hit(Generic[Item]):
    """A ranked id and its score, with what later stages add: its record (``item``: an
    ``ImageRecord`` or ``CaptionRecord``, None until read), when its photo was taken
    (None: unknown or not read) and its relevance (None: no relevance model)."""

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
