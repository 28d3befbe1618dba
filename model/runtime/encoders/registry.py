"""Every sentence encoder by name: what it reads, how it is built, which matrices it needs.

Adding an encoder touches this table only: the joint model, its checkpoints, the
command line (``--encoder``) and the service find it here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from torch import nn

from groundsearch.model.runtime.encoders.recurrent import CharGRUAttention, WordRNN
from groundsearch.model.runtime.encoders.sequence import BagOfWords, ChainRNN
from groundsearch.model.runtime.encoders.tree_batch import PositionInventory, RelationInventory
from groundsearch.model.runtime.encoders.tree_lstm import ChildSumTreeLSTM
from groundsearch.model.runtime.encoders.tree_rnn import TreeRNN
from groundsearch.model.runtime.parsing.tree import DependencyTree

if TYPE_CHECKING:
    from groundsearch.model.runtime.joint import JointConfig
    from groundsearch.model.runtime.text.vocab import Vocabulary

#: What an encoder reads: the dependency tree, the word sequence or the raw characters.
Input = Literal["tree", "words", "chars"]
Inventory = RelationInventory | PositionInventory
#: The matrix inventories a checkpoint can name, by class name.
INVENTORIES: dict[str, type[Inventory]] = {
    "RelationInventory": RelationInventory,
    "PositionInventory": PositionInventory,
}


@dataclass(frozen=True)
class EncoderSpec:
    """One encoder: its input, its constructor and (tree RNNs) its matrix inventory."""

    name: str
    input: Input
    build: Callable[[JointConfig, Vocabulary, Inventory | None], nn.Module]
    inventory: Callable[[JointConfig, Sequence[DependencyTree]], Inventory] | None = None

    @property
    def uses_words(self) -> bool:
        """Whether sentences are read through the word vocabulary (not characters)."""
        return self.input != "chars"


def _tree_rnn(config: JointConfig, vocab: Vocabulary, inventory: Inventory | None) -> nn.Module:
    if inventory is None:
        raise ValueError(f"{config.encoder} needs a matrix inventory")
    return TreeRNN(vocab.vectors, n_matrices=len(inventory), **_common(config))


def _options(config: JointConfig, *names: str) -> dict[str, Any]:
    """The config fields every encoder takes, plus ``names``."""
    return {n: getattr(config, n) for n in ("hidden", "freeze_words", "seed", *names)}


def _common(config: JointConfig) -> dict[str, Any]:
    """Options of the paper's encoders (identity-initialised matrices)."""
    return _options(config, "init_noise")


def _recurrent(config: JointConfig) -> dict[str, Any]:
    """Options of the gated recurrent encoders."""
    return _options(config, "rnn_hidden")


def _word_rnn(cell: str, config: JointConfig, vocab: Vocabulary) -> nn.Module:
    return WordRNN(vocab.vectors, cell=cell, **_recurrent(config))


def _relations(config: JointConfig, trees: Sequence[DependencyTree]) -> Inventory:
    return RelationInventory.build(trees, min_count=config.relation_min_count)


def _positions(config: JointConfig, trees: Sequence[DependencyTree]) -> Inventory:
    return PositionInventory.build(trees)


ENCODERS: dict[str, EncoderSpec] = {
    spec.name: spec
    for spec in (
        EncoderSpec("sdt-rnn", "tree", _tree_rnn, _relations),
        EncoderSpec("dt-rnn", "tree", _tree_rnn, _positions),
        EncoderSpec(
            "tree-lstm", "tree", lambda c, v, _: ChildSumTreeLSTM(v.vectors, **_recurrent(c))
        ),
        EncoderSpec("bow", "words", lambda c, v, _: BagOfWords(v.vectors, **_common(c))),
        EncoderSpec("chain-rnn", "words", lambda c, v, _: ChainRNN(v.vectors, **_common(c))),
        EncoderSpec(
            "lstm", "words", lambda c, v, _: WordRNN(v.vectors, cell="lstm", **_recurrent(c))
        ),
        EncoderSpec(
            "gru", "words", lambda c, v, _: WordRNN(v.vectors, cell="gru", **_recurrent(c))
        ),
        EncoderSpec("char-gru", "chars", lambda c, v, _: CharGRUAttention(**_recurrent(c))),
    )
}


def encoder_spec(name: str) -> EncoderSpec:
    """The spec of encoder ``name``; ValueError naming the choices if there is none."""
    try:
        return ENCODERS[name]
    except KeyError:
        raise ValueError(f"unknown encoder {name!r}; choose from {sorted(ENCODERS)}") from None
