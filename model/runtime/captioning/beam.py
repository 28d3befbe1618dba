"""Beam search over a caption decoder, for many vectors at once.

Each row keeps ``beam`` live hypotheses; a hypothesis that picks ``<eos>`` is finished
and scored by its log-probability divided by length**``length_penalty`` (length counts
``<eos>``). A row stops once it has ``beam`` finished sentences and no live one scores
better than the last of them; at ``max_len`` words only ``<eos>`` may follow. Repeating
a content word (any word but ``STOPWORDS``) or an n-gram of ``no_repeat_ngram`` words
costs ``repeat_penalty`` (inf: forbidden). No sampling: the same input gives the same
sentences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from groundsearch.model.runtime.captioning.decoder import CaptionDecoder


@dataclass(frozen=True)
class Generated:
    """A written sentence and its score (length-normalised log-probability, or the
    re-ranked score)."""

    text: str
    score: float


@dataclass(frozen=True)
class BeamSettings:
    """How ``beam_search`` searches (see the module's docstring)."""

    beam: int = 3
    max_len: int = 20
    length_penalty: float = 1.0
    repeat_penalty: float = math.inf
    no_repeat_ngram: int = 3

    def __post_init__(self) -> None:
        if self.beam < 1 or self.max_len < 1:
            raise ValueError(
                f"beam and max_len must be at least 1, got {self.beam}, {self.max_len}"
            )
        if self.repeat_penalty < 0:
            raise ValueError(f"repeat_penalty must be ≥ 0, got {self.repeat_penalty}")


def repeat_mask(
    history: torch.Tensor, seen: torch.Tensor, content: torch.Tensor, n: int
) -> torch.Tensor:
    """Which next words (N × V) would repeat a content word already in ``history``
    (N × t word ids) or complete an n-gram of ``n`` words already there."""
    mask = seen & content[None]
    t = history.shape[1]
    if n >= 2 and t >= n:
        windows = history.unfold(1, n, 1)  # N × (t − n + 1) × n: every complete n-gram
        prefix = history[:, t - n + 1 :]  # the last n − 1 words
        match = (windows[:, :, : n - 1] == prefix[:, None]).all(dim=2)
        rows, pos = match.nonzero(as_tuple=True)
        mask[rows, windows[rows, pos, n - 1]] = True
    return mask


@torch.no_grad()
def beam_search(decoder: CaptionDecoder, v: torch.Tensor, s: BeamSettings) -> list[list[Generated]]:
    """``s.beam`` sentences for each unit vector of ``v`` (n × dim), best first."""
    vocab = decoder.vocab
    n, k, size = len(v), s.beam, len(vocab)
    cond, (h, c) = decoder.start(v)
    cond, h, c = cond.repeat_interleave(k, 0), h.repeat_interleave(k, 1), c.repeat_interleave(k, 1)
    scores = torch.full((n, k), -math.inf)
    scores[:, 0] = 0.0  # one live hypothesis per row at first
    tokens = torch.full((n * k, 1), vocab.bos, dtype=torch.long)
    seen = torch.zeros((n * k, size), dtype=torch.bool)
    content = ~decoder.stopwords
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(n)]
    done = [False] * n
    for t in range(s.max_len + 1):
        logp, (h, c) = decoder.step(tokens[:, -1], cond, (h, c))
        logp[:, [vocab.pad, vocab.unk, vocab.bos]] = -math.inf
        if t == 0:
            logp[:, vocab.eos] = -math.inf
        if t == s.max_len:  # only <eos> may follow max_len words
            eos = logp[:, vocab.eos].clone()
            logp.fill_(-math.inf)
            logp[:, vocab.eos] = eos
        if s.repeat_penalty > 0:
            penalised = repeat_mask(tokens[:, 1:], seen, content, s.no_repeat_ngram)
            logp = torch.where(penalised, logp - s.repeat_penalty, logp)
        ends = (scores.reshape(-1) + logp[:, vocab.eos]).reshape(n, k).tolist()
        logp[:, vocab.eos] = -math.inf
        cand = (scores.reshape(-1, 1) + logp).reshape(n, k * size)
        top_scores, top_index = cand.topk(k, dim=1)
        new_scores = top_scores.clone()
        new_source, new_word = top_index // size, top_index % size
        for row in range(n):
            if done[row]:
                new_scores[row] = -math.inf
                continue
            for source, score in enumerate(ends[row]):
                if score > -math.inf:  # every live hypothesis may end here
                    ids = tokens[row * k + source, 1:].tolist()
                    finished[row].append((score / (len(ids) + 1) ** s.length_penalty, ids))
            done[row] = _settled(finished[row], new_scores[row], t + 2, s)
        if all(done):
            break
        index = (torch.arange(n)[:, None] * k + new_source).reshape(-1)
        tokens = torch.cat([tokens[index], new_word.reshape(-1, 1)], dim=1)
        h, c, seen = h[:, index], c[:, index], seen[index]
        seen[torch.arange(n * k), new_word.reshape(-1)] = True
        scores = new_scores
    out = []
    for ended in finished:
        ended.sort(key=lambda f: -f[0])
        out.append([Generated(vocab.decode(ids), float(score)) for score, ids in ended[:k]])
    return out


def _settled(
    finished: list[tuple[float, list[int]]], live: torch.Tensor, length: int, s: BeamSettings
) -> bool:
    """Whether a row has no live hypothesis left, or ``beam`` finished sentences none of
    its live hypotheses (ending at ``length``) would beat."""
    if float(live.max()) == -math.inf:
        return True
    if len(finished) < s.beam:
        return False
    kth = sorted((f[0] for f in finished), reverse=True)[s.beam - 1]
    return float(live.max()) / length**s.length_penalty < kth
