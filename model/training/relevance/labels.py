"""Which photos a caption query's hits are relevant to: its own photo and those
whose captions agree on its nouns."""

from __future__ import annotations

from collections import Counter

import numpy as np

from groundsearch.model.runtime.concepts import NOUNS
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.training.relevance.splits import SplitData

#: Captions of a photo that must use a noun for it to be the photo's consensus noun.
CONSENSUS = 3


def caption_nouns(data: SplitData) -> list[frozenset[str]]:
    """Each caption's noun lemmas (lower case)."""
    return [frozenset(n.lemma.lower() for n in tree if n.upos in NOUNS) for tree in data.trees]


def consensus_nouns(data: SplitData, least: int = CONSENSUS) -> list[frozenset[str]]:
    """Each photo's noun lemmas used by at least ``least`` (or all) of its captions."""
    counts: list[Counter[str]] = [Counter() for _ in data.ds.images]
    captions = np.bincount(data.caption_image, minlength=len(counts))
    for nouns, image in zip(caption_nouns(data), data.caption_image, strict=True):
        counts[int(image)].update(nouns)
    return [
        frozenset(w for w, c in cnt.items() if c >= min(least, n))
        for cnt, n in zip(counts, captions, strict=True)
    ]


def main_nouns(data: SplitData, least: int = CONSENSUS) -> list[frozenset[str]]:
    """Each caption's noun lemmas that are consensus nouns of its own photo."""
    consensus = consensus_nouns(data, least)
    own = data.caption_image
    return [n & consensus[int(own[c])] for c, n in enumerate(caption_nouns(data))]


def subject_noun(tree: DependencyTree, main: frozenset[str]) -> str | None:
    """The main noun that is the caption's subject, else its root, else its first."""
    lemmas = [n.lemma.lower() for n in tree]
    for n, lemma in zip(tree, lemmas, strict=True):
        if n.deprel.startswith("nsubj") and lemma in main:
            return lemma
    if tree.root.lemma.lower() in main:
        return tree.root.lemma.lower()
    return next((lemma for lemma in lemmas if lemma in main), None)


def caption_photo_relevant(data: SplitData, least: int = CONSENSUS) -> np.ndarray:
    """captions × photos, True for the caption's own photo and each photo whose consensus
    nouns hold its subject (``subject_noun``) and half of its main nouns."""
    consensus = consensus_nouns(data, least)
    main = main_nouns(data, least)
    subjects = [subject_noun(t, m) for t, m in zip(data.trees, main, strict=True)]
    vocab = {w: i for i, w in enumerate(sorted(set().union(*consensus, *main)))}
    has = np.zeros((len(consensus), len(vocab)), np.float32)
    for j, nouns in enumerate(consensus):
        has[j, [vocab[w] for w in nouns]] = 1.0
    wants = np.zeros((len(main), len(vocab)), np.float32)
    for c, nouns in enumerate(main):
        wants[c, [vocab[w] for w in nouns]] = 1.0
    covered = wants @ has.T  # the caption's main nouns each photo holds
    half = 2 * covered >= wants.sum(axis=1, keepdims=True)
    subject = np.zeros_like(half)
    for c, w in enumerate(subjects):
        if w is not None:
            subject[c] = has[:, vocab[w]] > 0
    relevant = half & subject
    relevant[np.arange(len(main)), data.caption_image] = True
    return relevant
