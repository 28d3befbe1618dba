"""The word-vector layer every word-level encoder starts with, and the inventories' base."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class Names:
    """An inventory: names (of matrices, characters), each known by its index."""

    names: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.names)

    @cached_property
    def _lookup(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}


def word_embedding(embeddings: np.ndarray, freeze: bool = True) -> nn.Embedding:
    """An embedding layer of ``embeddings`` (row 0 the unknown word), frozen by default."""
    weights = torch.as_tensor(np.asarray(embeddings, dtype=np.float32))
    return nn.Embedding.from_pretrained(weights, freeze=freeze)
