"""Every sentence encoder by name: what it reads, how it is built, which matrices it needs.

Adding an encoder touches this table only: the joint model, its checkpoints, the
command line (``--encoder``) and the service find it here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from torch import nn

from groundsearch.model.runtime.encoders.recurrent import (
    CharGRUAttention,
    CharInventory,
    MerkxFrankCharEncoder,
    WordRNN,
)
from groundsearch.model.runtime.encoders.sequence import BagOfWords, ChainRNN
from groundsearch.model.runtime.encoders.tree_batch import (
    ChildOrderInventory,
    PositionInventory,
    RelationInventory,
)
from groundsearch.model.runtime.encoders.tree_lstm import ChildSumTreeLSTM, LeftRightTreeLSTM
from groundsearch.model.runtime.encoders.tree_rnn import TreeRNN
from groundsearch.model.runtime.parsing.tree import DependencyTree

if TYPE_CHECKING:
    from groundsearch.model.runtime.joint import JointConfig
    from groundsearch.model.runtime.text.vocab import Vocabulary

#: What an encoder reads: the dependency tree, the word sequence or the raw characters.
Input = Literal["tree", "words", "chars"]
Inventory = RelationInventory | PositionInventory | ChildOrderInventory | CharInventory
#: The inventories a checkpoint can name, by class name.
INVENTORIES: dict[str, type[Inventory]] = {
    cls.__name__: cls
    for cls in (RelationInventory, PositionInventory, ChildOrderInventory, CharInventory)
}
#: p of the left/right Tree-LSTM when ``max_child_order`` is left at 0.
TREE_LSTM_LR_ORDER = 3


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
    return TreeRNN(
        vocab.vectors,
        n_matrices=len(inventory),
        weighted=not config.unweighted,
        nonlinearity=config.nonlinearity,
        **_common(config),
    )


def _tree_lstm_lr(config: JointConfig, vocab: Vocabulary, inventory: Inventory | None) -> nn.Module:
    if not isinstance(inventory, ChildOrderInventory):
        raise ValueError("tree-lstm-lr needs a child-order inventory")
    return LeftRightTreeLSTM(vocab.vectors, n_positions=len(inventory), **_recurrent(config))


def _char_mf(config: JointConfig, vocab: Vocabulary, inventory: Inventory | None) -> nn.Module:
    if not isinstance(inventory, CharInventory):
        raise ValueError("char-gru-mf needs the character inventory of its training captions")
    return MerkxFrankCharEncoder(
        len(inventory), cell=config.char_cell, pooling=config.char_pooling, **_recurrent(config)
    )


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


def _child_orders(config: JointConfig, trees: Sequence[DependencyTree]) -> Inventory:
    return ChildOrderInventory.build(
        trees, min_count=config.relation_min_count, max_order=config.max_child_order
    )


def _lr_positions(config: JointConfig, trees: Sequence[DependencyTree]) -> Inventory:
    return ChildOrderInventory.build(trees, max_order=config.max_child_order or TREE_LSTM_LR_ORDER)


def _characters(config: JointConfig, trees: Sequence[DependencyTree]) -> Inventory:
    return CharInventory.build(t.text for t in trees)


ENCODERS: dict[str, EncoderSpec] = {
    spec.name: spec
    for spec in (
        EncoderSpec("sdt-rnn", "tree", _tree_rnn, _relations),
        # the paper's DT-RNN: matrices by the child's order on its side of the head
        EncoderSpec("dt-rnn", "tree", _tree_rnn, _child_orders),
        # ours: matrices by the child's side and word distance to the head
        EncoderSpec("dt-rnn-distance", "tree", _tree_rnn, _positions),
        EncoderSpec(
            "tree-lstm", "tree", lambda c, v, _: ChildSumTreeLSTM(v.vectors, **_recurrent(c))
        ),
        EncoderSpec("tree-lstm-lr", "tree", _tree_lstm_lr, _lr_positions),
        EncoderSpec("bow", "words", lambda c, v, _: BagOfWords(v.vectors, **_common(c))),
        EncoderSpec("chain-rnn", "words", lambda c, v, _: ChainRNN(v.vectors, **_common(c))),
        EncoderSpec(
            "lstm", "words", lambda c, v, _: WordRNN(v.vectors, cell="lstm", **_recurrent(c))
        ),
        EncoderSpec(
            "gru", "words", lambda c, v, _: WordRNN(v.vectors, cell="gru", **_recurrent(c))
        ),
        EncoderSpec("char-gru", "chars", lambda c, v, _: CharGRUAttention(**_recurrent(c))),
        EncoderSpec("char-gru-mf", "chars", _char_mf, _characters),
    )
}


def encoder_spec(name: str) -> EncoderSpec:
    """The spec of encoder ``name``; ValueError naming the choices if there is none."""
    try:
        return ENCODERS[name]
    except KeyError:
        raise ValueError(f"unknown encoder {name!r}; choose from {sorted(ENCODERS)}") from None
