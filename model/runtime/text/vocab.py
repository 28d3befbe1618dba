"""A vocabulary of lower-cased training words with GloVe 6B 50-d vectors; row 0 is the
unknown word, with the mean GloVe vector (as training words GloVe lacks)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

UNK = "<unk>"


@dataclass
class Vocabulary:
    """Word ↔ row mapping plus the embedding matrix (``vectors[i]`` for ``words[i]``)."""

    words: list[str]
    vectors: np.ndarray

    def __post_init__(self) -> None:
        if self.words[:1] != [UNK]:
            raise ValueError(f"the first word of a vocabulary must be {UNK!r}")
        if len(self.words) != len(self.vectors):
            raise ValueError(f"{len(self.words)} words but {len(self.vectors)} vectors")
        self._index = {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def index(self, word: str) -> int:
        """Row of a word (lower-cased), 0 if unknown."""
        return self._index.get(word.lower(), 0)

    def encode(self, words: Sequence[str]) -> list[int]:
        return [self.index(w) for w in words]

    def known(self, words: Sequence[str]) -> int:
        """How many of ``words`` have their own row."""
        return sum(1 for w in words if w.lower() in self._index)

    def require_known(self, sentences: Sequence[Sequence[str]], what: str = "caption") -> None:
        """NoKnownWordError naming the first sentence with no known word."""
        for i, words in enumerate(sentences):
            if self.known([w for w in words if any(c.isalnum() for c in w)]) == 0:
                text = " ".join(words)
                which = f"{what} {i + 1}" if len(sentences) > 1 else what
                raise NoKnownWordError(f"{which} ({text[:80]!r}) has no word the model knows")

    @classmethod
    def build(
        cls,
        sentences: Iterable[Sequence[str]],
        glove_words: Sequence[str],
        glove_vectors: np.ndarray,
        min_count: int = 1,
    ) -> Vocabulary:
        """Words seen at least ``min_count`` times, ordered by frequency then spelling."""
        counts = Counter(w.lower() for s in sentences for w in s)
        kept = sorted(
            (w for w, c in counts.items() if c >= min_count and w != UNK),
            key=lambda w: (-counts[w], w),
        )
        glove_index = {w: i for i, w in enumerate(glove_words)}
        unk = glove_vectors.mean(axis=0)
        rows = [glove_vectors[glove_index[w]] if w in glove_index else unk for w in kept]
        return cls([UNK, *kept], np.stack([unk, *rows]).astype(np.float32))

    def state_dict(self) -> dict[str, Any]:
        return {"words": list(self.words), "vectors": self.vectors}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> Vocabulary:
        return cls(list(state["words"]), np.asarray(state["vectors"], dtype=np.float32))


class NoKnownWordError(ValueError):
    """A sentence made only of words outside the vocabulary."""
