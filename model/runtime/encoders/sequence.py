"""The paper's sequence baselines: bag of words and the chain RNN."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

from groundsearch.model.runtime.encoders.tree_rnn import block_identity
from groundsearch.model.runtime.encoders.words import word_embedding


def word_batch(word_ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded ids (batch × longest) and lengths."""
    if not word_ids or any(len(s) == 0 for s in word_ids):
        raise ValueError("every sentence needs at least one word")
    padded = pad_sequence([torch.tensor(s) for s in word_ids], batch_first=True)
    return padded, torch.tensor([len(s) for s in word_ids])


class _WordBaseline(nn.Module):
    """Word vectors, then matrices initialised as block identities plus noise (the
    paper's baselines); ``init_matrices`` makes each encoder's own."""

    def __init__(
        self,
        embeddings: np.ndarray,
        hidden: int = 50,
        freeze_words: bool = True,
        init_noise: float = 0.01,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.embed = word_embedding(embeddings, freeze_words)
        self.init_matrices(hidden, init_noise, torch.Generator().manual_seed(seed))

    def init_matrices(self, hidden: int, noise: float, g: torch.Generator) -> None:
        raise NotImplementedError


class BagOfWords(_WordBaseline):
    """Mean word vector, then a linear map to the hidden size (identity-initialised)."""

    def init_matrices(self, hidden: int, noise: float, g: torch.Generator) -> None:
        self.W = nn.Parameter(block_identity(hidden, self.embed.embedding_dim, noise, g))

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, lengths = batch
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).float()
        mean = (self.embed(ids) * mask[..., None]).sum(1) / lengths[:, None].float()
        return mean @ self.W.T


class ChainRNN(_WordBaseline):
    """``h_t = tanh(W_h h_{t−1} + W_x x_t)``; the sentence vector is the last state."""

    def init_matrices(self, hidden: int, noise: float, g: torch.Generator) -> None:
        self.W_x = nn.Parameter(block_identity(hidden, self.embed.embedding_dim, noise, g))
        self.W_h = nn.Parameter(block_identity(hidden, hidden, noise, g))

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, lengths = batch
        x = self.embed(ids) @ self.W_x.T
        h, last = (x.new_zeros(ids.shape[0], self.W_h.shape[0]) for _ in range(2))
        for t in range(ids.shape[1]):
            h = torch.tanh(h @ self.W_h.T + x[:, t])
            last = torch.where((lengths - 1 == t)[:, None], h, last)
        return last
