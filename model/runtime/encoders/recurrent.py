"""Sibling encoders over sequences: word LSTM/GRU (Kiros et al. 2014) and the
character bi-GRU with self-attention (Merkx & Frank 2019): ours (``char-gru``:
lower-cased characters, scalar attention, projected to the joint space) and theirs as
published (``char-gru-mf``: raw characters, vector-valued attention, no projection)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import (
    PackedSequence,
    pack_padded_sequence,
    pad_packed_sequence,
    pad_sequence,
)

from groundsearch.model.runtime.encoders.words import Names, word_embedding

#: Characters the character encoder knows; everything else maps to index 1.
CHARS = " abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"-()&/"


def char_batch(texts: Sequence[str], max_chars: int = 300) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded character ids (0 = padding, 1 = unknown) and lengths, lower-cased."""
    return _char_ids([t.lower() for t in texts], {c: i + 2 for i, c in enumerate(CHARS)}, max_chars)


def _char_ids(
    texts: Sequence[str], lookup: dict[str, int], max_chars: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded ids (``lookup``'s, 1 for any other character) and lengths of ``texts``."""
    if not texts or any(not t for t in texts):
        raise ValueError("every text needs at least one character")
    seqs = [torch.tensor([lookup.get(c, 1) for c in t[:max_chars]]) for t in texts]
    return pad_sequence(seqs, batch_first=True), torch.tensor([len(s) for s in seqs])


def _packed(embed: nn.Embedding, batch: tuple[torch.Tensor, torch.Tensor]) -> PackedSequence:
    """A batch of padded ids and lengths, embedded and packed for an RNN."""
    ids, lengths = batch
    return pack_padded_sequence(embed(ids), lengths, batch_first=True, enforce_sorted=False)


def _states(
    rnn: nn.RNNBase, embed: nn.Embedding, batch: tuple[torch.Tensor, torch.Tensor]
) -> torch.Tensor:
    """``rnn``'s output at every step of the batch (batch × time × features, 0 past the end)."""
    return pad_packed_sequence(rnn(_packed(embed, batch))[0], batch_first=True)[0]


class WordRNN(nn.Module):
    """LSTM or GRU over word vectors; the last state, mapped to the joint space."""

    def __init__(
        self,
        embeddings: np.ndarray,
        hidden: int = 50,
        rnn_hidden: int = 512,
        cell: str = "lstm",
        freeze_words: bool = True,
        seed: int = 0,
        **_: object,
    ):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = word_embedding(embeddings, freeze_words)
        rnn = {"lstm": nn.LSTM, "gru": nn.GRU}[cell]
        self.rnn = rnn(self.embed.embedding_dim, rnn_hidden, batch_first=True)
        self.out = nn.Linear(rnn_hidden, hidden, bias=False)

    def forward(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        _, state = self.rnn(_packed(self.embed, batch))
        h = state[0] if isinstance(state, tuple) else state
        return self.out(h[-1])


class CharGRUAttention(nn.Module):
    """Characters → 1-layer bi-GRU → self-attention pooling → joint space (Merkx & Frank
    2019: 20-d character embeddings, attention with 128 hidden units)."""

    def __init__(
        self,
        hidden: int = 50,
        rnn_hidden: int = 512,
        char_dim: int = 20,
        attention: int = 128,
        seed: int = 0,
        **_: object,
    ) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(len(CHARS) + 2, char_dim, padding_idx=0)
        self.rnn = nn.GRU(char_dim, rnn_hidden, batch_first=True, bidirectional=True)
        self.att = nn.Sequential(
            nn.Linear(2 * rnn_hidden, attention), nn.Tanh(), nn.Linear(attention, 1)
        )
        self.out = nn.Linear(2 * rnn_hidden, hidden, bias=False)

    def forward(
        self, batch: tuple[torch.Tensor, torch.Tensor], return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        lengths = batch[1]
        states = _states(self.rnn, self.embed, batch)
        mask = torch.arange(states.shape[1])[None, :] < lengths[:, None]
        scores = self.att(states).squeeze(-1).masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=1)
        pooled = (weights[..., None] * states).sum(dim=1)
        out = self.out(pooled)
        return (out, weights) if return_weights else out


@dataclass(frozen=True)
class CharInventory(Names):
    """Every character of the training captions, case and punctuation kept (Merkx &
    Frank 2019); id 0 is padding, 1 a character never seen in training."""

    @classmethod
    def build(cls, texts: Iterable[str]) -> CharInventory:
        return cls(tuple(sorted({c for t in texts for c in t})))

    def batch(
        self, texts: Sequence[str], max_chars: int = 300
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded character ids and lengths of the raw texts (no lower-casing)."""
        return _char_ids(texts, {c: i + 2 for c, i in self._lookup.items()}, max_chars)


class MerkxFrankCharEncoder(nn.Module):
    """Merkx & Frank (2019) as published: 20-d character embeddings, a bi-GRU and
    vector-valued self-attention; no projection, so ``hidden`` must be 2·``rnn_hidden``."""

    def __init__(
        self,
        n_chars: int,
        hidden: int = 1024,
        rnn_hidden: int = 512,
        char_dim: int = 20,
        attention: int = 128,
        cell: str = "gru",
        pooling: str = "attention",
        seed: int = 0,
        **_: object,
    ) -> None:
        super().__init__()
        if hidden != 2 * rnn_hidden:
            raise ValueError(
                f"char-gru-mf embeds sentences as the bi-GRU's 2 × {rnn_hidden} states, "
                f"so the joint space must be --hidden {2 * rnn_hidden}, not {hidden}"
            )
        if cell not in ("gru", "lstm") or pooling not in ("attention", "max"):
            raise ValueError(f"unknown cell {cell!r} or pooling {pooling!r}")
        torch.manual_seed(seed)
        self.pooling = pooling
        self.embed = nn.Embedding(n_chars + 2, char_dim, padding_idx=0)
        rnn = {"gru": nn.GRU, "lstm": nn.LSTM}[cell]
        self.rnn = rnn(char_dim, rnn_hidden, batch_first=True, bidirectional=True)
        self.att = nn.Sequential(
            nn.Linear(2 * rnn_hidden, attention), nn.Tanh(), nn.Linear(attention, 2 * rnn_hidden)
        )

    def forward(
        self, batch: tuple[torch.Tensor, torch.Tensor], return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        lengths = batch[1]
        states = _states(self.rnn, self.embed, batch)
        mask = (torch.arange(states.shape[1])[None, :] < lengths[:, None])[..., None]
        if self.pooling == "max":
            pooled = states.masked_fill(~mask, float("-inf")).max(dim=1).values
            weights = torch.zeros_like(states)
        else:
            scores = self.att(states).masked_fill(~mask, float("-inf"))
            weights = scores.softmax(dim=1)  # over time, for every dimension
            pooled = (weights * states).sum(dim=1)
        return (pooled, weights) if return_weights else pooled
