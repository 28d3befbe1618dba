"""The word-vector layer every word-level encoder starts with."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def word_embedding(embeddings: np.ndarray, freeze: bool = True) -> nn.Embedding:
    """An embedding layer of ``embeddings`` (row 0 the unknown word), frozen by default."""
    weights = torch.as_tensor(np.asarray(embeddings, dtype=np.float32))
    return nn.Embedding.from_pretrained(weights, freeze=freeze)
