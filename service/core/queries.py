"""Query texts through the text front door, their vectors in an LRU cache keyed by the
cleaned text (``is_cached``, one lookup, runs on the event loop: no parse slot)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from groundsearch.model.runtime.evidence import NounWords, noun_words
from groundsearch.model.runtime.fusion import content_words
from groundsearch.model.runtime.parsing import DependencyTree
from groundsearch.model.runtime.sentences import Sentences
from groundsearch.service.core.timing import Stages, Timings


class QueryVectors:
    """Cleaned query texts → trees and unit vectors (UnusableText says why not)."""

    def __init__(self, door: Sentences, stages: Stages, size: int) -> None:
        self.door, self.stages, self.size = door, stages, size
        self._cache: OrderedDict[str, tuple[np.ndarray, NounWords, int]] = OrderedDict()
        self._lock = threading.Lock()

    def clean(self, text: str, what: str = "text") -> str:
        """The cleaned text; UnusableText if it is too long or has no letter or digit."""
        return self.door.clean(text, what)

    def is_cached(self, cleaned: str) -> bool:
        """Whether the vector of ``cleaned`` is cached (lock-free: one dict lookup)."""
        return cleaned in self._cache

    def trees(
        self, cleaned: Sequence[str], whats: Sequence[str], timings: Timings
    ) -> list[DependencyTree]:
        """Trees of cleaned texts (UnusableText naming the first unusable one)."""
        with self.stages.stage("parse", timings):
            return self.door.trees(cleaned, whats, cleaned=True)

    def vector(self, cleaned: str, timings: Timings, what: str = "text") -> np.ndarray:
        """The unit query vector of a cleaned text (cached by it)."""
        return self.vector_and_nouns(cleaned, timings, what)[0]

    def vector_and_nouns(
        self, cleaned: str, timings: Timings, what: str = "text"
    ) -> tuple[np.ndarray, NounWords, int]:
        """A cleaned text's unit vector, nouns and number of content words, cached."""
        with self._lock:
            cached = self._cache.get(cleaned)
            if cached is not None:
                self._cache.move_to_end(cleaned)
                return cached
        tree = self.trees([cleaned], [what], timings)[0]
        with self.stages.stage("encode", timings):
            entry = (self.door.embed([tree])[0], noun_words(tree), content_words(tree))
        if self.size:
            with self._lock:
                self._cache[cleaned] = entry
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        return entry
