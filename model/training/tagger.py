"""Fit the word tagger (``model.runtime.tagger``): one logistic regression per caption
noun over the backbone's pooled features, labels from the photos' own captions.

A photo is positive for a noun when one of its captions uses its lemma as a noun (DCC's
lexical labels). All rows are fitted together (full-batch L-BFGS, mean BCE plus L2).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import torch

from groundsearch.model.data import CaptionedImages
from groundsearch.model.data.sources import Source
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.tagger import WordTagger
from groundsearch.model.training.caption_data import CaptionData

#: A noun is tagged when at least this many training photos' captions use it (8 keeps
#: cat and cow, 9 and 13 photos of the 6,000).
LEAST = 8
#: The L2 penalty (dev mean AP over the 852 nouns: 1e-3 → 0.1 → 1: 19.7 → 20.9 → 19.2).
WEIGHT_DECAY = 0.1
#: A written form is tagged when the parser tags it a noun this often (drops "mid",
#: "backward", "overall").
NOUN_SHARE = 0.75
NOUNS = frozenset({"NOUN"})


def photo_nouns(ds: CaptionedImages, trees: Sequence[DependencyTree]) -> list[set[str]]:
    """Each photo's nouns: the noun lemmas any of its captions uses (lower case, letters)."""
    out: list[set[str]] = [set() for _ in ds.images]
    for tree, image in zip(trees, ds.caption_image, strict=True):
        out[int(image)].update(
            n.lemma.lower() for n in tree if n.upos in NOUNS and n.lemma.isalpha()
        )
    return out


def tagger_split(
    data: CaptionData, sources: Sequence[Source], split: str, vectors: bool = False
) -> tuple[list[set[str]], np.ndarray, list[DependencyTree]]:
    """One split of ``sources``, joined: each photo's nouns, its features (the backbone's,
    or with ``vectors`` the joint model's photo vectors) and every caption's tree."""
    nouns, parts, trees = [], [], []
    for source in sources:
        ds = data.collection(source, split)
        source_trees = data.trees(ds)
        nouns += photo_nouns(ds, source_trees)
        parts.append(data.features(ds))
        trees += source_trees
    features = np.concatenate(parts)
    if vectors:
        features = np.asarray(data.model.embed_images(features), np.float32)
    return nouns, features, trees


def vocabulary(nouns: Sequence[set[str]], least: int = LEAST) -> list[str]:
    """The nouns used on at least ``least`` photos, most frequent first (ties by word)."""
    counts = Counter(w for ws in nouns for w in ws)
    return sorted((w for w, c in counts.items() if c >= least), key=lambda w: (-counts[w], w))


def surface_forms(trees: Sequence[DependencyTree], lemmas: Sequence[str]) -> list[str]:
    """Each lemma as captions write it: its most frequent noun form (lower case; ties by
    form), so a decoder is asked for "leaves" and "goggles", not "leave" and "goggle"."""
    forms: dict[str, Counter[str]] = {w: Counter() for w in lemmas}
    for tree in trees:
        for n in tree:
            if n.upos in NOUNS and (c := forms.get(n.lemma.lower())) is not None:
                c[n.text.lower()] += 1
    return [min(forms[w], key=lambda f: (-forms[w][f], f)) if forms[w] else w for w in lemmas]


def noun_share(trees: Sequence[DependencyTree], words: Sequence[str]) -> list[float]:
    """The share of each written word's occurrences that the parser tags as a noun
    ("overall", "backward", "mid" are mostly not)."""
    wanted = set(words)
    noun, every = Counter[str](), Counter[str]()
    for tree in trees:
        for n in tree:
            if (t := n.text.lower()) in wanted:
                every[t] += 1
                noun[t] += n.upos in NOUNS
    return [noun[w] / every[w] if every[w] else 0.0 for w in words]


def choose_words(
    nouns: Sequence[set[str]], trees: Sequence[DependencyTree], least: int = LEAST
) -> tuple[list[str], list[str]]:
    """The tagged nouns' lemmas and written forms: lemmas on ``least`` photos whose written
    form is a noun at least ``NOUN_SHARE`` of the times (one lemma per written form)."""
    lemmas = vocabulary(nouns, least)
    written = surface_forms(trees, lemmas)
    shares = noun_share(trees, written)
    kept: dict[str, str] = {}
    for lemma, form, sh in zip(lemmas, written, shares, strict=True):
        if sh >= NOUN_SHARE and form not in kept:
            kept[form] = lemma
    return list(kept.values()), list(kept)


def label_matrix(nouns: Sequence[set[str]], words: Sequence[str]) -> np.ndarray:
    """photos × words: 1 where the photo's captions use the word."""
    col = {w: j for j, w in enumerate(words)}
    y = np.zeros((len(nouns), len(words)), np.float32)
    for i, ws in enumerate(nouns):
        for w in ws:
            if w in col:
                y[i, col[w]] = 1.0
    return y


def fit_tagger(
    features: np.ndarray,
    labels: np.ndarray,
    words: Sequence[str],
    backbone: str,
    weight_decay: float = WEIGHT_DECAY,
    steps: int = 200,
    seed: int = 0,
    lemmas: Sequence[str] = (),
) -> WordTagger:
    """Fit every word's logistic regression on standardised ``features`` at once:
    minimise mean BCE + ``weight_decay`` · ‖W‖² / 2 with L-BFGS (``steps`` iterations)."""
    z = np.asarray(features, np.float32)
    y = np.asarray(labels, np.float32)
    if z.ndim != 2 or y.shape != (z.shape[0], len(words)):
        raise ValueError(f"features {z.shape} and labels {y.shape} do not match {len(words)} words")
    mean = z.mean(axis=0)
    scale = z.std(axis=0) + 1e-6
    torch.manual_seed(seed)
    x = torch.from_numpy((z - mean) / scale)
    t = torch.from_numpy(y)
    prior = y.mean(axis=0).clip(1e-4, 1 - 1e-4)
    w = torch.zeros(len(words), z.shape[1], requires_grad=True)
    b = torch.tensor(np.log(prior / (1 - prior)), dtype=torch.float32, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        logits = x @ w.T + b
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, t)
        loss = loss + 0.5 * weight_decay * (w * w).sum() / len(words)
        loss.backward()
        return loss

    opt.step(closure)
    weights, bias = w.detach().numpy().copy(), b.detach().numpy().copy()
    return WordTagger(tuple(words), backbone, mean, scale, weights, bias, tuple(lemmas))


def mean_average_precision(tagger: WordTagger, features: np.ndarray, labels: np.ndarray) -> float:
    """Mean over words with a positive photo of scikit-learn's average precision."""
    from sklearn.metrics import average_precision_score

    p = tagger.probabilities(features)
    aps = [average_precision_score(labels[:, j], p[:, j]) for j in np.flatnonzero(labels.any(0))]
    return float(np.mean(aps)) if aps else 0.0
