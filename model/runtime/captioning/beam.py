"""Beam search over a caption decoder, for many vectors at once (deterministic): finished
hypotheses scored by log-probability / length**``length_penalty``; repeating a content
word or an n-gram of ``no_repeat_ngram`` words costs ``repeat_penalty`` (inf: never)."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from groundsearch.model.runtime.captioning.words import SPECIALS, sentence

if TYPE_CHECKING:
    from groundsearch.model.runtime.captioning.decoder import CaptionDecoder


@dataclass(frozen=True)
class Generated:
    """A written sentence and its score (length-normalised log-probability or the re-ranked one)."""

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
def _shaped(
    logp: torch.Tensor, t: int, s: BeamSettings, eos: int, *history: torch.Tensor
) -> torch.Tensor:
    """One step's log-probabilities as the search may use them: no <eos> first, only
    <eos> after ``max_len`` words, repeats (``repeat_mask`` of ``history``: the tokens,
    seen and content masks) lowered by the penalty."""
    tokens, seen, content = history
    if t == 0:
        logp[:, eos] = -math.inf
    if t == s.max_len:  # only <eos> may follow max_len words
        end = logp[:, eos].clone()
        logp.fill_(-math.inf)
        logp[:, eos] = end
    if s.repeat_penalty > 0:
        penalised = repeat_mask(tokens[:, 1:], seen, content, s.no_repeat_ngram)
        logp = torch.where(penalised, logp - s.repeat_penalty, logp)
    return logp


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
        logp = _shaped(logp, t, s, vocab.eos, tokens, seen, content)
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
            _finish(finished[row], ends[row], tokens[row * k : (row + 1) * k], s)
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


def _finish(
    finished: list[tuple[float, list[int]]],
    ends: list[float],
    tokens: torch.Tensor,
    s: BeamSettings,
) -> None:
    """Add to ``finished`` each hypothesis (``tokens``' rows) that may end here (``ends``:
    its score with <eos>), scored by log-probability / length**``length_penalty``."""
    for row, score in enumerate(ends):
        if score > -math.inf:
            ids = tokens[row, 1:].tolist()
            finished.append((score / (len(ids) + 1) ** s.length_penalty, ids))


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


@dataclass(frozen=True)
class Constraints:
    """Words a row's sentence must contain one of (Anderson et al. 2017), as ids of the
    vocabulary extended by ``borrowed`` words: id ``len(vocab) + j`` is ``borrowed[j]``,
    which borrows the weights of trained word ``sources[j]`` (DCC)."""

    rows: list[list[int]]  # per row, the constraint word ids (empty: unconstrained)
    borrowed: tuple[str, ...] = ()
    sources: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if len(self.borrowed) != len(self.sources):
            raise ValueError("each borrowed word needs its source word")


#: Word beginnings read with a consonant sound although spelled with a vowel.
_CONSONANT_SOUND = ("uni", "use", "usu", "eu", "one", "once")


def _indefinite(word: str) -> str:
    vowel = word[:1] in "aeiou" and not word.startswith(_CONSONANT_SOUND)
    return "an" if vowel or word.startswith("hour") else "a"


@torch.no_grad()
def constrained_search(
    decoder: CaptionDecoder, v: torch.Tensor, s: BeamSettings, constraints: Constraints
) -> list[list[Generated]]:
    """``s.beam`` sentences for each unit vector of ``v``, best first, that contain one of
    its row's constraint words (a beam each for not yet / already met; unmet ones last)."""
    vocab = decoder.vocab
    n, k, size = len(v), s.beam, len(vocab)
    extra = len(constraints.borrowed)
    full, words = size + extra, [*vocab.words, *constraints.borrowed]
    if len(constraints.rows) != n:
        raise ValueError(f"{len(constraints.rows)} constraint rows for {n} vectors")
    allowed = torch.zeros((n, full), dtype=torch.bool)  # the constraint words of each row
    for row, ids in enumerate(constraints.rows):
        if any(not 4 <= i < full for i in ids):
            raise ValueError(f"constraint ids must be words of the vocabulary, got {ids}")
        allowed[row, ids] = True
    sources = torch.tensor(constraints.sources, dtype=torch.long)
    states = 2
    rep = states * k
    hyps = n * rep  # row-major: row, state, beam
    cond, (h, c) = decoder.start(v)
    cond, h, c = (
        cond.repeat_interleave(rep, 0),
        h.repeat_interleave(rep, 1),
        c.repeat_interleave(rep, 1),
    )
    scores = torch.full((n, states, k), -math.inf)
    scores[:, 0, 0] = 0.0
    tokens = torch.full((hyps, 1), vocab.bos, dtype=torch.long)  # ids in the full range
    seen = torch.zeros((hyps, full), dtype=torch.bool)
    content = torch.cat([~decoder.stopwords, torch.ones(extra, dtype=torch.bool)])
    # the trained word each id is fed back as (a borrowed word feeds its source)
    feed = torch.cat([torch.arange(size), sources]) if extra else torch.arange(size)
    finished: list[list[list[tuple[float, list[int]]]]] = [[[], []] for _ in range(n)]
    done = [False] * n
    row_allowed = allowed.repeat_interleave(rep, 0)  # hyps × full
    for t in range(s.max_len + 1):
        logp, (h, c) = decoder.step(feed[tokens[:, -1]], cond, (h, c))
        logp[:, [vocab.pad, vocab.unk, vocab.bos]] = -math.inf
        if extra:
            logp = torch.cat([logp, logp[:, sources]], dim=1)
            logp[:, size:] = torch.where(row_allowed[:, size:], logp[:, size:], -math.inf)
        logp = _shaped(logp, t, s, vocab.eos, tokens, seen, content)
        ends = (scores.reshape(-1) + logp[:, vocab.eos]).reshape(n, states, k).tolist()
        logp[:, vocab.eos] = -math.inf
        total = (scores.reshape(-1, 1) + logp).reshape(n, states, k, full)
        meets = allowed[:, None, :].expand(n, k, full)
        # state 0 → 0: any word but a constraint; 0 → 1: a constraint; 1 → 1: any word
        stay0 = torch.where(meets, -math.inf, total[:, 0]).reshape(n, k * full)
        into1 = torch.cat([torch.where(meets, total[:, 0], -math.inf), total[:, 1]], dim=1)
        s0, i0 = stay0.topk(k, dim=1)
        s1, i1 = into1.reshape(n, 2 * k * full).topk(k, dim=1)
        src0, word0 = i0 // full, i0 % full  # from state 0, beam src0
        src1, word1 = i1 // full, i1 % full  # src1 0..2k−1: the first k are state 0's beams
        new_scores = torch.stack([s0, s1], dim=1)
        for row in range(n):
            if done[row]:
                new_scores[row] = -math.inf
                continue
            for state in range(states):
                at = (row * states + state) * k
                _finish(finished[row][state], ends[row][state], tokens[at : at + k], s)
            target = finished[row][1] if constraints.rows[row] else finished[row][0]
            done[row] = _settled(target, new_scores[row].reshape(-1), t + 2, s)
        if all(done):
            break
        base = torch.arange(n)[:, None] * rep
        from0 = base + src0  # state 0's beams sit at offsets 0..k−1 of the row
        from1 = base + src1  # state 1's at k..2k−1: src1 counts them on from k already
        index = torch.cat([from0, from1], dim=1).reshape(-1)
        new_word = torch.cat([word0, word1], dim=1).reshape(-1)
        tokens = torch.cat([tokens[index], new_word[:, None]], dim=1)
        h, c, seen = h[:, index], c[:, index], seen[index]
        seen[torch.arange(hyps), new_word] = True
        scores = new_scores
    out = []
    for row, (unmet, met) in enumerate(finished):
        met.sort(key=lambda f: -f[0])
        unmet.sort(key=lambda f: -f[0])
        best, wanted = (met + unmet)[:k], set(constraints.rows[row])
        out.append([Generated(sentence_of(words, ids, wanted), float(sc)) for sc, ids in best])
    return out


def sentence_of(words: Sequence[str], ids: Sequence[int], forced: Collection[int] = ()) -> str:
    """The sentence of word ids over ``words`` (specials left out), "a"/"an" agreeing
    with a ``forced`` word (a constraint) after it."""
    kept = [i for i in ids if i >= len(SPECIALS)]
    tokens = [words[i] for i in kept]
    for j in range(len(tokens) - 1):
        if tokens[j] in ("a", "an") and kept[j + 1] in forced:
            tokens[j] = _indefinite(tokens[j + 1])
    return sentence(tokens)
