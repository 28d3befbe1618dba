"""The paper's example tree, "Students ride bikes at night.", built by hand, and a
small random vocabulary over its words, shared by the encoder tests."""

from __future__ import annotations

import numpy as np

from groundsearch.model.runtime.parsing.tree import DependencyTree, build_tree
from groundsearch.model.runtime.text.vocab import Vocabulary

WORDS = ["Students", "ride", "bikes", "at", "night", "."]
HEADS = [2, 0, 2, 5, 2, 2]
RELS = ["nsubj", "root", "obj", "case", "obl", "punct"]
UPOS = ["NOUN", "VERB", "NOUN", "ADP", "NOUN", "PUNCT"]


def students() -> DependencyTree:
    n = len(WORDS)
    return build_tree(
        "Students ride bikes at night.",
        WORDS,
        [w.lower() for w in WORDS],
        UPOS,
        ["_"] * n,
        ["_"] * n,
        HEADS,
        RELS,
    )


def bikes_ride() -> DependencyTree:
    return build_tree(
        "bikes ride",
        ["bikes", "ride"],
        ["bike", "ride"],
        ["NOUN", "VERB"],
        ["_"] * 2,
        ["_"] * 2,
        [2, 0],
        ["nsubj", "root"],
    )


def toy_vocab(dim: int = 3, seed: int = 0) -> Vocabulary:
    rng = np.random.default_rng(seed)
    words = ["<unk>", *sorted({w.lower() for w in WORDS})]
    return Vocabulary(words, rng.normal(size=(len(words), dim)).astype(np.float32))
