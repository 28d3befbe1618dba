"""An LSTM language model conditioned on a point of the joint space (Kiros et al. 2014):
the unit vector ``v`` sets the initial state (``tanh(A v), tanh(B v)``) and ``C v`` is
fed beside the word vector at every step."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from groundsearch.model.runtime.captioning.beam import (
    BeamSettings,
    Constraints,
    Generated,
    beam_search,
    constrained_search,
)
from groundsearch.model.runtime.captioning.words import DecoderVocab, tokenize


@dataclass
class DecoderConfig:
    """Architecture of a caption decoder (training options live elsewhere)."""

    dim: int = 640
    embed: int = 50
    hidden: int = field(default=512, metadata={"help": "LSTM state size"})
    cond: int = field(default=256, metadata={"help": "size of the vector fed at every step"})
    dropout: float = field(default=0.3, metadata={"help": "dropout on words and states"})


class CaptionDecoder(nn.Module):
    """Writes sentences for joint-space vectors; ``vocab`` maps rows to words."""

    #: Which rows are function words (``words.STOPWORDS``), free to repeat.
    stopwords: torch.Tensor

    def __init__(
        self, config: DecoderConfig, vocab: DecoderVocab, word_vectors: np.ndarray | None = None
    ) -> None:
        super().__init__()
        self.config, self.vocab = config, vocab
        #: What the artifact recorded beside the weights (training command, scores).
        self.extra: dict[str, Any] = {}
        self.embed = nn.Embedding(len(vocab), config.embed, padding_idx=vocab.pad)
        if word_vectors is not None:
            self.embed.weight.data.copy_(torch.as_tensor(word_vectors, dtype=torch.float32))
        self.init_h, self.init_c = (nn.Linear(config.dim, config.hidden) for _ in range(2))
        self.cond = nn.Linear(config.dim, config.cond)
        self.lstm = nn.LSTM(config.embed + config.cond, config.hidden, batch_first=True)
        self.drop = nn.Dropout(config.dropout)
        self.out = nn.Linear(config.hidden, len(vocab))
        self.register_buffer(
            "stopwords", torch.tensor(vocab.stopword_mask(), dtype=torch.bool), persistent=False
        )
        self.eval()

    def unit(self, vectors: np.ndarray | torch.Tensor) -> torch.Tensor:
        """The first ``dim`` columns of ``vectors`` (the joint part) as unit float32 rows."""
        v = torch.as_tensor(np.asarray(vectors, dtype=np.float32))
        if v.ndim != 2 or v.shape[1] < self.config.dim:
            raise ValueError(f"vectors must be n × {self.config.dim}, got {tuple(v.shape)}")
        return nn.functional.normalize(v[:, : self.config.dim], dim=1)

    def start(self, v: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """The per-step conditioning input and the initial LSTM state of unit vectors."""
        state = (torch.tanh(self.init_h(v))[None], torch.tanh(self.init_c(v))[None])
        return torch.tanh(self.cond(v)), state

    def forward(self, v: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Next-word logits (B × T × V) for tokens (B × T) under vectors ``v``: teacher forcing."""
        cond, state = self.start(v)
        words = self.drop(self.embed(tokens))
        steps = torch.cat([words, cond[:, None].expand(-1, tokens.shape[1], -1)], dim=2)
        hidden, _ = self.lstm(steps, state)
        return self.out(self.drop(hidden))

    def step(
        self, tokens: torch.Tensor, cond: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Log-probabilities of the next word after ``tokens`` (N), and the new state."""
        x = torch.cat([self.embed(tokens), cond], dim=1)[:, None]
        hidden, state = self.lstm(x, state)
        return torch.log_softmax(self.out(hidden[:, 0]), dim=1), state

    @torch.no_grad()
    def generate(
        self,
        vectors: np.ndarray,
        beam: int = 3,
        max_len: int = 20,
        length_penalty: float = 1.0,
        repeat_penalty: float = math.inf,
        no_repeat_ngram: int = 3,
        batch_size: int = 256,
        constraints: Constraints | None = None,
    ) -> list[list[Generated]]:
        """For each row of ``vectors``, ``beam`` sentences, best first; a row with
        ``constraints`` gets the best ones containing one of its words."""
        if self.training:
            raise RuntimeError("generate() needs eval mode (call .eval())")
        settings = BeamSettings(beam, max_len, length_penalty, repeat_penalty, no_repeat_ngram)
        v = self.unit(vectors)
        if constraints is not None and len(constraints.rows) != len(v):
            raise ValueError(f"{len(constraints.rows)} constraint rows for {len(v)} vectors")
        rows = constraints.rows if constraints is not None else [[]] * len(v)
        out: list[list[Generated]] = []
        for i in range(0, len(v), batch_size):
            out += beam_search(self, v[i : i + batch_size], settings)
        bound = [i for i, r in enumerate(rows) if r]
        for i in range(0, len(bound), batch_size):
            part = bound[i : i + batch_size]
            assert constraints is not None
            these = Constraints([rows[j] for j in part], constraints.borrowed, constraints.sources)
            found = constrained_search(self, v[part], settings, these)
            words = [*self.vocab.words, *constraints.borrowed]
            for j, beams in zip(part, found, strict=True):
                out[j] = _merge(beams, out[j], {words[w] for w in rows[j]}, beam)
        return out


def _merge(
    constrained: list[Generated], free: list[Generated], wanted: set[str], k: int
) -> list[Generated]:
    """The ``k`` best sentences with a ``wanted`` word from both searches (the free one's
    pruning differs), then the others, best first within each."""
    seen: dict[str, Generated] = {}
    for g in sorted([*constrained, *free], key=lambda g: -g.score):
        seen.setdefault(g.text, g)
    met = [g for g in seen.values() if wanted & set(tokenize(g.text))]
    return (met + [g for g in seen.values() if g not in met])[:k]
