"""Every sentence encoder by name: what it reads, its own options (a frozen dataclass
beside ``JointConfig``; names one flat namespace), how it is built, which matrices it
needs. Adding an encoder touches this table only."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

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
from groundsearch.model.runtime.encoders.tree_rnn import NONLINEARITIES, TreeRNN, activation
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


def _freeze_words() -> Any:
    return field(
        default=True,
        metadata={"help": "fine-tune word vectors", "flag": "--tune-words", "invert": True},
    )


def _rnn_hidden() -> Any:
    return field(default=512, metadata={"help": "LSTM/GRU/Tree-LSTM state size"})


def _max_child_order() -> Any:
    return field(
        default=0,
        metadata={
            "help": "dt-rnn, tree-lstm-lr: children past this order on a side of their head "
            "share the last order's parameters (0: dt-rnn keeps every order seen "
            "--relation-min-count times, tree-lstm-lr takes p = 3)"
        },
    )


def _check_order(max_child_order: int) -> None:
    if max_child_order < 0:
        raise ValueError(f"max_child_order must be ≥ 0, got {max_child_order}")


@dataclass(frozen=True)
class EncoderOptions:
    """What one encoder family, and no other, is configured by (subclassed per family)."""


@dataclass(frozen=True)
class PaperOptions(EncoderOptions):
    """bow, chain-rnn: word vectors and identity-initialised matrices."""

    freeze_words: bool = _freeze_words()
    init_noise: float = 0.01


@dataclass(frozen=True)
class TreeRNNOptions(PaperOptions):
    """sdt-rnn, dt-rnn, dt-rnn-distance: the paper's tree RNNs (Eq. 4)."""

    relation_min_count: int = field(
        default=5, metadata={"help": "sdt-rnn: rarer relations share their base relation's matrix"}
    )
    max_child_order: int = _max_child_order()
    unweighted: bool = field(
        default=False,
        metadata={"help": "dt-rnn/sdt-rnn: drop Eq. 4's ℓ weighting (the paper's Eq. 1–3)"},
    )
    nonlinearity: str = field(
        default="tanh",
        metadata={"help": "dt-rnn/sdt-rnn: the composition's f", "choices": list(NONLINEARITIES)},
    )

    def __post_init__(self) -> None:
        activation(self.nonlinearity)  # ValueError naming the choices
        _check_order(self.max_child_order)


@dataclass(frozen=True)
class WordRNNOptions(EncoderOptions):
    """lstm, gru, tree-lstm: gated recurrences over word vectors."""

    freeze_words: bool = _freeze_words()
    rnn_hidden: int = _rnn_hidden()


@dataclass(frozen=True)
class LeftRightOptions(WordRNNOptions):
    """tree-lstm-lr: a Tree-LSTM with parameters by the child's side and order."""

    max_child_order: int = _max_child_order()

    def __post_init__(self) -> None:
        _check_order(self.max_child_order)


@dataclass(frozen=True)
class CharRNNOptions(EncoderOptions):
    """char-gru: a bidirectional GRU over characters."""

    rnn_hidden: int = _rnn_hidden()


@dataclass(frozen=True)
class CharMFOptions(CharRNNOptions):
    """char-gru-mf: Merkx & Frank's character encoder."""

    char_cell: str = field(
        default="gru",
        metadata={"help": "char-gru-mf: the recurrent cell", "choices": ["gru", "lstm"]},
    )
    char_pooling: str = field(
        default="attention",
        metadata={
            "help": "char-gru-mf: vector-valued self-attention or max-pooling over time",
            "choices": ["attention", "max"],
        },
    )

    def __post_init__(self) -> None:
        if self.char_cell not in ("gru", "lstm"):
            raise ValueError(f"unknown char_cell {self.char_cell!r}; choose gru or lstm")
        if self.char_pooling not in ("attention", "max"):
            raise ValueError(f"unknown char_pooling {self.char_pooling!r}; choose attention or max")


OptionsT = TypeVar("OptionsT", bound=EncoderOptions)


@dataclass(frozen=True)
class EncoderSpec(Generic[OptionsT]):
    """One encoder: its input, its options, its constructor and (tree RNNs, char-gru-mf)
    its inventory, both given the joint config's shared part and the encoder's options."""

    name: str
    input: Input
    options: type[OptionsT]
    build: Callable[[JointConfig, OptionsT, Vocabulary, Inventory | None], nn.Module]
    inventory: Callable[[OptionsT, Sequence[DependencyTree]], Inventory] | None = None

    @property
    def uses_words(self) -> bool:
        """Whether sentences are read through the word vocabulary (not characters)."""
        return self.input != "chars"

    def encoder(
        self, config: JointConfig, vocab: Vocabulary, inventory: Inventory | None
    ) -> nn.Module:
        """The encoder module ``config`` describes."""
        return self.build(config, self.options_of(config), vocab, inventory)

    def build_inventory(
        self, config: JointConfig, trees: Sequence[DependencyTree]
    ) -> Inventory | None:
        """The inventory of ``trees`` this encoder needs (None: it needs none)."""
        return None if self.inventory is None else self.inventory(self.options_of(config), trees)

    def options_of(self, config: JointConfig) -> OptionsT:
        """``config``'s options, checked to be this encoder's."""
        options = config.options
        if not isinstance(options, self.options) or type(options) is not self.options:
            raise ValueError(
                f"{self.name} takes {self.options.__name__}, not {type(options).__name__}"
            )
        return options


def _shared(config: JointConfig) -> dict[str, Any]:
    """What every encoder takes from the shared config."""
    return {"hidden": config.hidden, "seed": config.seed}


def _paper(config: JointConfig, options: PaperOptions) -> dict[str, Any]:
    """Options of the paper's encoders (identity-initialised matrices)."""
    own = {"freeze_words": options.freeze_words, "init_noise": options.init_noise}
    return {**_shared(config), **own}


def _recurrent(config: JointConfig, options: WordRNNOptions) -> dict[str, Any]:
    """Options of the gated recurrent encoders over words."""
    own = {"freeze_words": options.freeze_words, "rnn_hidden": options.rnn_hidden}
    return {**_shared(config), **own}


def _over_words(cls: Callable[..., nn.Module], **fixed: Any) -> Callable[..., nn.Module]:
    """The builder of a word-level encoder ``cls`` that needs no inventory."""

    def build(config: JointConfig, options: Any, vocab: Vocabulary, _: object) -> nn.Module:
        shared = _paper if isinstance(options, PaperOptions) else _recurrent
        return cls(vocab.vectors, **fixed, **shared(config, options))

    return build


def _tree_rnn(
    config: JointConfig, options: TreeRNNOptions, vocab: Vocabulary, inventory: Inventory | None
) -> nn.Module:
    if inventory is None:
        raise ValueError(f"{config.encoder} needs a matrix inventory")
    return TreeRNN(
        vocab.vectors,
        n_matrices=len(inventory),
        weighted=not options.unweighted,
        nonlinearity=options.nonlinearity,
        **_paper(config, options),
    )


InventoryT = TypeVar("InventoryT", bound=Inventory)


def _needs(inventory: Inventory | None, kind: type[InventoryT], what: str) -> InventoryT:
    """``inventory``, checked to be the ``kind`` an encoder needs (ValueError: ``what``)."""
    if not isinstance(inventory, kind):
        raise ValueError(what)
    return inventory


def _tree_lstm_lr(
    config: JointConfig, options: LeftRightOptions, vocab: Vocabulary, inventory: Inventory | None
) -> nn.Module:
    orders = _needs(inventory, ChildOrderInventory, "tree-lstm-lr needs a child-order inventory")
    return LeftRightTreeLSTM(vocab.vectors, n_positions=len(orders), **_recurrent(config, options))


def _char_mf(
    config: JointConfig, options: CharMFOptions, vocab: Vocabulary, inventory: Inventory | None
) -> nn.Module:
    what = "char-gru-mf needs the character inventory of its training captions"
    chars = _needs(inventory, CharInventory, what)
    return MerkxFrankCharEncoder(
        len(chars),
        cell=options.char_cell,
        pooling=options.char_pooling,
        rnn_hidden=options.rnn_hidden,
        **_shared(config),
    )


def _relations(options: TreeRNNOptions, trees: Sequence[DependencyTree]) -> Inventory:
    return RelationInventory.build(trees, min_count=options.relation_min_count)


def _positions(options: TreeRNNOptions, trees: Sequence[DependencyTree]) -> Inventory:
    return PositionInventory.build(trees)


def _child_orders(options: TreeRNNOptions, trees: Sequence[DependencyTree]) -> Inventory:
    return ChildOrderInventory.build(
        trees, min_count=options.relation_min_count, max_order=options.max_child_order
    )


def _lr_positions(options: LeftRightOptions, trees: Sequence[DependencyTree]) -> Inventory:
    return ChildOrderInventory.build(trees, max_order=options.max_child_order or TREE_LSTM_LR_ORDER)


def _characters(options: CharMFOptions, trees: Sequence[DependencyTree]) -> Inventory:
    return CharInventory.build(t.text for t in trees)


ENCODERS: dict[str, EncoderSpec[Any]] = {
    spec.name: spec
    for spec in (
        EncoderSpec("sdt-rnn", "tree", TreeRNNOptions, _tree_rnn, _relations),
        # the paper's DT-RNN: matrices by the child's order on its side of the head
        EncoderSpec("dt-rnn", "tree", TreeRNNOptions, _tree_rnn, _child_orders),
        # ours: matrices by the child's side and word distance to the head
        EncoderSpec("dt-rnn-distance", "tree", TreeRNNOptions, _tree_rnn, _positions),
        EncoderSpec("tree-lstm", "tree", WordRNNOptions, _over_words(ChildSumTreeLSTM)),
        EncoderSpec("tree-lstm-lr", "tree", LeftRightOptions, _tree_lstm_lr, _lr_positions),
        EncoderSpec("bow", "words", PaperOptions, _over_words(BagOfWords)),
        EncoderSpec("chain-rnn", "words", PaperOptions, _over_words(ChainRNN)),
        EncoderSpec("lstm", "words", WordRNNOptions, _over_words(WordRNN, cell="lstm")),
        EncoderSpec("gru", "words", WordRNNOptions, _over_words(WordRNN, cell="gru")),
        EncoderSpec(
            "char-gru",
            "chars",
            CharRNNOptions,
            lambda c, o, v, _: CharGRUAttention(rnn_hidden=o.rnn_hidden, **_shared(c)),
        ),
        EncoderSpec("char-gru-mf", "chars", CharMFOptions, _char_mf, _characters),
    )
}
#: Every family's options class, once each, in the table's order.
OPTIONS: tuple[type[EncoderOptions], ...] = tuple(
    dict.fromkeys(spec.options for spec in ENCODERS.values())
)


def encoder_spec(name: str) -> EncoderSpec[Any]:
    """The spec of encoder ``name``; ValueError naming the choices if there is none."""
    try:
        return ENCODERS[name]
    except KeyError:
        raise ValueError(f"unknown encoder {name!r}; choose from {sorted(ENCODERS)}") from None


def option_names() -> set[str]:
    """Every family's option names (the flat namespace checkpoints and flags use)."""
    return {f.name for cls in OPTIONS for f in fields(cls)}


def encoder_options(name: str, values: Mapping[str, Any]) -> EncoderOptions:
    """Encoder ``name``'s options from a flat mapping: its own fields that ``values``
    has, the defaults for the others; other families' keys are not its business."""
    cls = encoder_spec(name).options
    return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})
