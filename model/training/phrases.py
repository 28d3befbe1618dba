"""Noun phrases of training captions as extra positives of their photos (``--phrases``).

People search by phrases ("a dog", "a red ball") a model trained on whole sentences never
saw alone. A caption's noun phrases (each noun with its determiner, adjectives, compounds
and numbers) join the training split as captions of its photo, drawn ``rate`` times an
epoch per caption; a phrase is no negative for another photo whose captions use its noun.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from groundsearch.model.runtime.parsing.tree import DependencyTree, build_tree

#: The dependents a noun phrase keeps.
KEPT = frozenset({"det", "amod", "compound", "nummod"})


def noun_phrases(tree: DependencyTree) -> list[tuple[DependencyTree, str]]:
    """Each noun's phrase (the noun with its ``KEPT`` dependents, in sentence order) as
    a tree, with the noun's lemma; a phrase that is the whole caption is left out."""
    out = []
    for n in tree:
        if n.upos != "NOUN":
            continue
        kept = [c for c in tree.children(n.index) if c.deprel.split(":")[0] in KEPT]
        nodes = sorted([n, *kept], key=lambda m: m.index)
        if len(nodes) >= sum(m.upos != "PUNCT" for m in tree):
            continue
        position = {m.index: i + 1 for i, m in enumerate(nodes)}
        phrase = build_tree(
            " ".join(m.text for m in nodes),
            [m.text for m in nodes],
            [m.lemma for m in nodes],
            [m.upos for m in nodes],
            [m.xpos for m in nodes],
            [m.feats for m in nodes],
            [0 if m is n else position[n.index] for m in nodes],
            ["root" if m is n else m.deprel for m in nodes],
        )
        out.append((phrase, n.lemma.lower()))
    return out


def with_phrases(
    trees: Sequence[DependencyTree],
    caption_image: np.ndarray,
    rate: np.ndarray | None,
    per_caption: float,
) -> tuple[list[DependencyTree], np.ndarray, np.ndarray, np.ndarray]:
    """The captions followed by their noun phrases: trees, each one's photo, draws per
    epoch and noun ("" for a caption)."""
    own = np.ones(len(trees)) if rate is None else np.asarray(rate, np.float64)
    new_trees, images, rates, nouns = list(trees), [], [], []
    for tree, image, r in zip(trees, caption_image, own, strict=True):
        phrases = noun_phrases(tree)
        for phrase, noun in phrases:
            new_trees.append(phrase)
            images.append(int(image))
            rates.append(per_caption * r / len(phrases))
            nouns.append(noun)
    links = np.concatenate([np.asarray(caption_image), np.asarray(images, np.int64)])
    all_rates = np.concatenate([own, np.asarray(rates)])
    all_nouns = np.array([""] * len(trees) + nouns, dtype=object)
    return new_trees, links.astype(np.int64), all_rates, all_nouns


def photo_nouns(trees: Sequence[DependencyTree], caption_image: np.ndarray) -> list[frozenset]:
    """Each photo's noun lemmas over all its captions."""
    out: list[set[str]] = [set() for _ in range(int(np.max(caption_image)) + 1)]
    for tree, image in zip(trees, caption_image, strict=True):
        out[int(image)].update(n.lemma.lower() for n in tree if n.upos == "NOUN")
    return [frozenset(s) for s in out]


def fitting(nouns: np.ndarray, images: np.ndarray, photos: Sequence[frozenset]) -> np.ndarray:
    """(images × sentences) of a batch: True where sentence c is a phrase whose noun photo
    i's captions use (no negative for it)."""
    out = np.zeros((len(images), len(nouns)), bool)
    for c, noun in enumerate(nouns):
        if noun:
            out[:, c] = [noun in photos[int(i)] for i in images]
    return out
