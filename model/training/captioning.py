"""Train a caption decoder on joint-space vectors: teacher forcing, cross-entropy, Adam,
dropout (Kiros, Salakhutdinov & Zemel 2014). It reads a photo's ``W_I z`` or, with
probability ``sentence_share``, another caption's vector of the same photo, so a free
sentence's vector decodes to a paraphrase too. Word vectors start from GloVe 6B 50-d.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from groundsearch.model.runtime.captioning.decoder import CaptionDecoder, DecoderConfig
from groundsearch.model.runtime.captioning.words import SPECIALS, DecoderVocab
from groundsearch.model.runtime.text.glove import load_glove
from groundsearch.model.training.loop import option


@dataclass(frozen=True)
class CaptionSet:
    """Photo vectors and their captions with vectors (``caption_photo[j]``: its photo's
    row); ``photo_names`` where known."""

    photo_vectors: np.ndarray
    caption_texts: tuple[str, ...]
    caption_photo: np.ndarray
    caption_vectors: np.ndarray
    photo_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.caption_texts)
        if len(self.caption_photo) != n or len(self.caption_vectors) != n or n == 0:
            raise ValueError("a caption set needs captions, each with its photo and vector")

    @classmethod
    def joined(cls, parts: Sequence[CaptionSet]) -> CaptionSet:
        """Several sets as one, in order."""
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [len(p.photo_vectors) for p in parts[:-1]])
        return cls(
            np.concatenate([p.photo_vectors for p in parts]),
            tuple(t for p in parts for t in p.caption_texts),
            np.concatenate([p.caption_photo + o for p, o in zip(parts, offsets, strict=True)]),
            np.concatenate([p.caption_vectors for p in parts]),
            tuple(n for p in parts for n in p.photo_names),
        )


SELECTIONS = ("loss", "cider")


@dataclass
class DecoderTrainConfig:
    """Optimisation settings (the architecture is ``DecoderConfig``)."""

    epochs: int = 12
    batch_size: int = 64
    lr: float = 2e-3
    sentence_share: float = option(0.5, "share of captions conditioned on another caption's vector")
    patience: int = option(2, "epochs without a better dev loss")
    min_count: int = option(5, "vocabulary: train words seen this often")
    max_words: int = option(24, "training captions cut to this length")
    clip: float = 5.0
    seed: int = 0
    select: str = option(
        "loss",
        "the epoch kept: the lowest pooled dev loss ('loss'), or the highest mean over the "
        "dev collections of its beam-3 sentences' CIDEr-D ('cider')",
    )

    def __post_init__(self) -> None:
        if self.select not in SELECTIONS:
            raise ValueError(f"select must be one of {', '.join(SELECTIONS)}, got {self.select!r}")
        if not 0.0 <= self.sentence_share <= 1.0:
            raise ValueError(f"sentence_share must be in [0, 1], got {self.sentence_share}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError("epochs and batch_size must be at least 1")


def glove_rows(vocab: DecoderVocab, seed: int = 0) -> np.ndarray:
    """Initial word vectors: GloVe 6B 50-d where GloVe has the word, small noise elsewhere."""
    words, vectors = load_glove()
    index = {w: i for i, w in enumerate(words)}
    rng = np.random.default_rng(seed)
    out = rng.normal(0.0, 0.1, size=(len(vocab), vectors.shape[1])).astype(np.float32)
    for i, w in enumerate(vocab.words):
        if w in index:
            out[i] = vectors[index[w]]
    out[vocab.pad] = 0.0
    return out


def encode_captions(vocab: DecoderVocab, texts: tuple[str, ...], max_words: int) -> list[list[int]]:
    """``<bos> words… <eos>`` per caption, cut to ``max_words`` words (then no ``<eos>``)."""
    return [vocab.encode(t)[: max_words + 2] for t in texts]


def pad(sequences: list[list[int]]) -> torch.Tensor:
    """Sequences of ids as one B × T tensor, padded with ``<pad>`` (0)."""
    out = torch.zeros((len(sequences), max(map(len, sequences))), dtype=torch.long)
    for i, s in enumerate(sequences):
        out[i, : len(s)] = torch.tensor(s)
    return out


def batches(lengths: np.ndarray, size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of similar lengths (pools of 50 batches sorted by length)."""
    order = rng.permutation(len(lengths))
    pool = size * 50
    out = []
    for start in range(0, len(order), pool):
        part = order[start : start + pool]
        part = part[np.argsort(lengths[part], kind="stable")]
        out += [part[i : i + size] for i in range(0, len(part), size)]
    rng.shuffle(out)
    return out


def siblings_of(data: CaptionSet) -> list[np.ndarray]:
    """For each photo row, the rows of its captions."""
    order = np.argsort(data.caption_photo, kind="stable")
    cuts = np.searchsorted(data.caption_photo[order], np.arange(len(data.photo_vectors) + 1))
    return [order[cuts[p] : cuts[p + 1]] for p in range(len(data.photo_vectors))]


def conditions(
    data: CaptionSet,
    rows: np.ndarray,
    share: float,
    rng: np.random.Generator,
    siblings: list[np.ndarray],
) -> np.ndarray:
    """The vectors captions ``rows`` are conditioned on: their photo's, or with
    probability ``share`` another caption's of the same photo (never their own)."""
    out = data.photo_vectors[data.caption_photo[rows]].copy()
    if share <= 0:
        return out
    for i, j in enumerate(rows):
        others = siblings[int(data.caption_photo[j])]
        others = others[others != j]
        if len(others) and rng.random() < share:
            out[i] = data.caption_vectors[rng.choice(others)]
    return out


def batch_loss(decoder: CaptionDecoder, vectors: np.ndarray, tokens: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the next words (padding left out)."""
    logits = decoder(decoder.unit(vectors), tokens[:, :-1])
    return nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1), ignore_index=0
    )


@torch.no_grad()
def dev_loss(decoder: CaptionDecoder, data: CaptionSet, max_words: int, batch: int = 500) -> float:
    """Per-word cross-entropy of the captions given their photos' vectors."""
    decoder.eval()
    encoded = encode_captions(decoder.vocab, data.caption_texts, max_words)
    total, words = 0.0, 0
    for i in range(0, len(encoded), batch):
        tokens = pad(encoded[i : i + batch])
        vectors = data.photo_vectors[data.caption_photo[i : i + batch]]
        n = int((tokens[:, 1:] != 0).sum())
        total += float(batch_loss(decoder, vectors, tokens)) * n
        words += n
    return total / max(words, 1)


def train_decoder(
    train: CaptionSet,
    dev: CaptionSet,
    config: DecoderTrainConfig,
    arch: DecoderConfig,
    word_vectors: Callable[[DecoderVocab], np.ndarray] = glove_rows,
    log: Callable[[str], None] = print,
    judge: Callable[[CaptionDecoder], Sequence[float]] | None = None,
    init: CaptionDecoder | None = None,
) -> tuple[CaptionDecoder, dict[str, Any]]:
    """The decoder of the epoch with the lowest dev loss, or with ``judge`` (its sentences'
    score on each dev collection) the highest mean score, and a summary of the run. The
    dev loss alone halves the step and stops training after ``patience`` such epochs. With
    ``init``, training goes on from that decoder (``extended``; ``arch`` is not read) and
    epoch 0, the decoder as it was, is a candidate too."""
    if (config.select == "cider") != (judge is not None):
        raise ValueError(f"select={config.select!r} needs a judge exactly when it is 'cider'")
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    vocab = DecoderVocab.build(train.caption_texts, config.min_count)
    dim = int(train.photo_vectors.shape[1])
    if init is None:
        arch = DecoderConfig(**{**asdict(arch), "dim": dim})
        decoder = CaptionDecoder(arch, vocab, word_vectors(vocab))
    else:
        if init.config.dim > dim:
            raise ValueError(f"the decoder reads {init.config.dim}-d vectors, these are {dim}-d")
        decoder = extended(init, vocab.words[len(SPECIALS) :], word_vectors)
        arch, vocab = decoder.config, decoder.vocab
    optimizer = torch.optim.Adam(decoder.parameters(), lr=config.lr)
    encoded = encode_captions(vocab, train.caption_texts, config.max_words)
    lengths = np.array([len(e) for e in encoded])
    siblings = siblings_of(train)
    history: list[dict[str, Any]] = []
    start = time.perf_counter()
    state = copy.deepcopy(decoder.state_dict())
    best = (math.inf, state, 0)
    kept = (-math.inf, state, 0)  # the judge's best: (score, weights, epoch)
    if init is not None:  # the decoder as it was: epoch 0
        row0 = _judged(decoder, dev, config, judge, {"epoch": 0})
        best = (row0["dev_loss"], state, 0)
        kept = (row0.get("judged", -math.inf), state, 0)
        row0["seconds"] = time.perf_counter() - start
        history.append(row0)
        log(f"epoch 0 (as it was): dev loss {row0['dev_loss']:.3f}{_said(row0)}")
    for epoch in range(1, config.epochs + 1):
        decoder.train()
        seen, running = 0, 0.0
        for rows in batches(lengths, config.batch_size, rng):
            tokens = pad([encoded[j] for j in rows])
            vectors = conditions(train, rows, config.sentence_share, rng, siblings)
            loss = batch_loss(decoder, vectors, tokens)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(decoder.parameters(), config.clip)
            optimizer.step()
            running += loss.item() * len(rows)
            seen += len(rows)
        row = _judged(decoder, dev, config, judge, {"epoch": epoch, "train_loss": running / seen})
        loss_dev = row["dev_loss"]
        if judge is not None and row["judged"] > kept[0]:
            kept = (row["judged"], copy.deepcopy(decoder.state_dict()), epoch)
        row["seconds"] = time.perf_counter() - start
        history.append(row)
        log(
            f"epoch {epoch}: train loss {running / seen:.3f}, dev loss {loss_dev:.3f}"
            f"{_said(row)} ({row['seconds']:.0f} s)"
        )
        if loss_dev < best[0]:
            best = (loss_dev, copy.deepcopy(decoder.state_dict()), epoch)
        elif epoch - best[2] >= config.patience:
            break
        else:  # no better: halve the step
            for group in optimizer.param_groups:
                group["lr"] *= 0.5
    chosen = kept if judge is not None else best
    decoder.load_state_dict(chosen[1])
    decoder.eval()
    summary = {
        "train": asdict(config),
        "arch": asdict(arch),
        "vocab_size": len(vocab),
        "init_words": len(init.vocab) if init is not None else None,
        "best_epoch": chosen[2],
        "dev_loss": next(h["dev_loss"] for h in history if h["epoch"] == chosen[2]),
        "judged": kept[0] if judge is not None else None,
        "history": history,
        "seconds": time.perf_counter() - start,
    }
    return decoder, summary


def _judged(
    decoder: CaptionDecoder,
    dev: CaptionSet,
    config: DecoderTrainConfig,
    judge: Callable[[CaptionDecoder], Sequence[float]] | None,
    row: dict[str, Any],
) -> dict[str, Any]:
    """``row`` with the decoder's dev loss and, with a ``judge``, its scores and their mean."""
    row["dev_loss"] = dev_loss(decoder, dev, config.max_words)
    if judge is not None:
        row["judged_each"] = [float(x) for x in judge(decoder)]
        row["judged"] = float(np.mean(row["judged_each"]))
    return row


def _said(row: Mapping[str, Any]) -> str:
    if "judged" not in row:
        return ""
    each = " / ".join(f"{x:.2f}" for x in row["judged_each"])
    return f", judged {row['judged']:.2f} ({each})"


def extended(
    decoder: CaptionDecoder,
    words: Sequence[str],
    word_vectors: Callable[[DecoderVocab], np.ndarray] = glove_rows,
) -> CaptionDecoder:
    """A copy of ``decoder`` with the ``words`` it lacks added after its own: their input vectors
    from ``word_vectors`` (GloVe), their output rows of zero weights and ``<unk>``'s bias (as likely
    as an unknown word until trained); every other weight as it was."""
    known = set(decoder.vocab.words)
    new = [w for w in dict.fromkeys(words) if w not in known]
    vocab = DecoderVocab((*decoder.vocab.words, *new))
    out = CaptionDecoder(decoder.config, vocab, word_vectors(vocab))
    n, old = len(decoder.vocab), decoder.state_dict()
    with torch.no_grad():
        for name, tensor in out.state_dict().items():  # views of the parameters
            if name == "embed.weight":
                tensor[:n].copy_(old[name])
            elif name in ("out.weight", "out.bias"):
                tensor[:n].copy_(old[name])
                tensor[n:] = 0.0 if name == "out.weight" else old[name][decoder.vocab.unk]
            else:
                tensor.copy_(old[name])
    out.extra = dict(decoder.extra)
    return out
