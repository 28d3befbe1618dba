"""The joint space: a sentence encoder for captions and ``v = W_I z`` for images.

A checkpoint records everything needed to rebuild the model — config, vocabulary,
matrix inventory, parser and backbone identity — and refuses to load against a
different parser or backbone (their trees or features would not match the weights).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from groundsearch.files import torch_save
from model.encoders.recurrent import CharGRUAttention, WordRNN, char_batch
from model.encoders.sequence import BagOfWords, ChainRNN, word_batch
from model.encoders.tree_batch import PositionInventory, RelationInventory, make_batch
from model.encoders.tree_lstm import ChildSumTreeLSTM
from model.encoders.tree_rnn import StackedTreeRNN, TreeRNN
from model.parsing.tree import DependencyTree
from model.text.vocab import Vocabulary

CHECKPOINT_FORMAT = 1
#: Guards the lazy rebuild of snapshot-ensemble members.
_MEMBERS_LOCK = threading.Lock()
#: Encoders composed along the dependency tree (matrices chosen per edge for the RNNs).
TREE_ENCODERS = {"sdt-rnn", "dt-rnn", "tree-lstm"}
#: Encoders over the word sequence.
SEQUENCE_ENCODERS = {"bow", "chain-rnn", "lstm", "gru"}
#: Encoders over the characters of the raw text.
CHAR_ENCODERS = {"char-gru"}
ENCODERS = sorted(TREE_ENCODERS | SEQUENCE_ENCODERS | CHAR_ENCODERS)


class CheckpointError(ValueError):
    """A checkpoint that cannot be used here, with the reason."""


def check_origin(
    path: Path, state: dict, parser: str | None, backbone: str | None, made: str = "trained"
) -> None:
    """CheckpointError if ``state`` was made with another parser or backbone than the
    ones given (its trees or features would not match what the model learned)."""
    if parser is not None and state["parser"] != parser:
        raise CheckpointError(
            f"{path} was {made} with parser {state['parser']}, but this parser is "
            f"{parser}: its parses would not match what the model learned"
        )
    if backbone is not None and state["backbone"] != backbone:
        raise CheckpointError(
            f"{path} was {made} on {state['backbone']} image features, but the "
            f"backbone here is {backbone}"
        )


@dataclass
class JointConfig:
    """Architecture of a joint model (training options live elsewhere)."""

    encoder: str = "sdt-rnn"
    hidden: int = 50
    rnn_hidden: int = 512
    image_dim: int = 1280
    freeze_words: bool = True
    relation_min_count: int = 5
    sqrt_features: bool = False
    init_noise: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        if self.encoder not in ENCODERS:
            raise ValueError(f"unknown encoder {self.encoder!r}; choose from {ENCODERS}")


def build_inventory(config: JointConfig, trees: Sequence[DependencyTree]):
    """The matrix inventory a tree encoder needs (None for sequence encoders)."""
    if config.encoder == "sdt-rnn":
        return RelationInventory.build(trees, min_count=config.relation_min_count)
    if config.encoder == "dt-rnn":
        return PositionInventory.build(trees)
    return None


class JointModel(nn.Module):
    """Sentence encoder + image projection into one space of size ``config.hidden``."""

    def __init__(
        self,
        config: JointConfig,
        vocab: Vocabulary,
        inventory: RelationInventory | PositionInventory | None,
        parser: str,
        backbone: str,
    ) -> None:
        super().__init__()
        self.config, self.vocab, self.inventory = config, vocab, inventory
        self.parser, self.backbone = parser, backbone
        common = dict(
            hidden=config.hidden,
            freeze_words=config.freeze_words,
            init_noise=config.init_noise,
            seed=config.seed,
        )
        recurrent = dict(
            hidden=config.hidden,
            rnn_hidden=config.rnn_hidden,
            freeze_words=config.freeze_words,
            seed=config.seed,
        )
        enc = config.encoder
        if enc in ("sdt-rnn", "dt-rnn"):
            if inventory is None:
                raise ValueError(f"{enc} needs a matrix inventory")
            self.encoder: nn.Module = TreeRNN(vocab.vectors, n_matrices=len(inventory), **common)
        elif enc == "tree-lstm":
            self.encoder = ChildSumTreeLSTM(vocab.vectors, **recurrent)
        elif enc == "bow":
            self.encoder = BagOfWords(vocab.vectors, **common)
        elif enc == "chain-rnn":
            self.encoder = ChainRNN(vocab.vectors, **common)
        elif enc in ("lstm", "gru"):
            self.encoder = WordRNN(vocab.vectors, cell=enc, **recurrent)
        else:
            self.encoder = CharGRUAttention(**recurrent)
        self.snapshots: list[dict] = []
        # (members, their tree RNNs stacked or None), rebuilt when the snapshots change; a
        # tuple, so that torch does not register the stacked module as a submodule
        self._ensemble: tuple[list[JointModel], StackedTreeRNN | None] = ([], None)
        g = torch.Generator().manual_seed(config.seed + 1)
        scale = 1.0 / np.sqrt(config.image_dim)
        self.W_I = nn.Parameter(scale * torch.randn(config.hidden, config.image_dim, generator=g))

    def prepare(self, trees: Sequence[DependencyTree]):
        """The encoder's input batch for parsed captions."""
        enc = self.config.encoder
        if enc in TREE_ENCODERS:
            if self.inventory is None:
                return make_batch(trees, self.vocab, lambda t: [0] * len(t))
            return make_batch(trees, self.vocab, self.inventory.matrix_of)
        if enc in CHAR_ENCODERS:
            return char_batch([t.text for t in trees])
        return word_batch([self.vocab.encode(t.words) for t in trees])

    def encode_sentences(self, trees: Sequence[DependencyTree]) -> torch.Tensor:
        return self.encoder(self.prepare(trees))

    def require_known_words(self, trees: Sequence[DependencyTree], what: str = "caption") -> None:
        """NoKnownWordError for a sentence with no word in the vocabulary (a word-level
        encoder could only give it the unknown word's vector); characters always count."""
        if self.config.encoder not in CHAR_ENCODERS:
            self.vocab.require_known([t.words for t in trees], what)

    # --- embeddings for retrieval (snapshot ensembles included) ---------------------------

    def members(self) -> list[JointModel]:
        """The models whose embeddings are combined: the snapshots when the checkpoint
        holds a snapshot ensemble (Merkx & Frank 2019), otherwise this model alone."""
        return self._built_ensemble()[0]

    def _built_ensemble(self) -> tuple[list[JointModel], StackedTreeRNN | None]:
        """The snapshot members and, when they are tree RNNs, one module running them
        all at once (built once, under a lock: threads of a server may ask together)."""
        if not self.snapshots:
            return [self], None
        with _MEMBERS_LOCK:
            if len(self._ensemble[0]) != len(self.snapshots):
                members = []
                for state in self.snapshots:
                    member = JointModel(
                        self.config, self.vocab, self.inventory, self.parser, self.backbone
                    )
                    member.load_state_dict(state)
                    members.append(member.eval())
                encoders = [m.encoder for m in members]
                stacked = (
                    StackedTreeRNN(encoders)
                    if len(members) > 1 and all(isinstance(e, TreeRNN) for e in encoders)
                    else None
                )
                self._ensemble = (members, stacked)
            return list(self._ensemble[0]), self._ensemble[1]

    @torch.no_grad()
    def embed_sentences(
        self, trees: Sequence[DependencyTree], normalize: bool, batch_size: int = 1000
    ) -> np.ndarray:
        """Caption embeddings for retrieval: each member's vectors (unit length when
        ``normalize``) scaled by 1/√M and concatenated, so that an inner product equals
        the members' mean score."""
        members, stacked = self._built_ensemble()
        if stacked is not None:
            roots = [
                stacked(self.prepare(trees[i : i + batch_size]))
                for i in range(0, len(trees), batch_size)
            ]
            return self._combine(list(torch.cat(roots, dim=1).unbind(0)), normalize)
        parts = []
        for member in members:
            member.eval()
            y = torch.cat(
                [
                    member.encode_sentences(trees[i : i + batch_size])
                    for i in range(0, len(trees), batch_size)
                ]
            )
            parts.append(y)
        return self._combine(parts, normalize)

    @torch.no_grad()
    def embed_images(self, features: torch.Tensor | np.ndarray, normalize: bool) -> np.ndarray:
        """Image embeddings for retrieval, combined like ``embed_sentences``."""
        return self._combine([m.encode_images(features) for m in self.members()], normalize)

    @staticmethod
    def _combine(parts: list[torch.Tensor], normalize: bool) -> np.ndarray:
        if normalize:
            parts = [torch.nn.functional.normalize(p, dim=1) for p in parts]
        return (torch.cat(parts, dim=1) / np.sqrt(len(parts))).numpy()

    def encode_images(self, features: torch.Tensor | np.ndarray) -> torch.Tensor:
        z = torch.as_tensor(np.asarray(features, dtype=np.float32))
        if z.ndim != 2 or z.shape[1] != self.config.image_dim:
            raise ValueError(
                f"image features must be N × {self.config.image_dim}, got {tuple(z.shape)}"
            )
        if self.config.sqrt_features:  # power normalisation: damps dominant activations
            z = z.sign() * z.abs().sqrt()
        return z @ self.W_I.T

    # --- checkpoints -------------------------------------------------------------------

    def save(self, path: Path, extra: dict | None = None, half: bool = False) -> None:
        """Write the checkpoint atomically; ``half`` stores the weights as float16
        (half the bytes; they are float32 again once loaded)."""
        vocab = self.vocab.state_dict()
        if half:
            vocab["vectors"] = np.asarray(vocab["vectors"], dtype=np.float16)
        state = {
            "format": CHECKPOINT_FORMAT,
            "config": asdict(self.config),
            "vocab": vocab,
            "inventory": None
            if self.inventory is None
            else {"kind": type(self.inventory).__name__, "names": list(self.inventory.names)},
            "parser": self.parser,
            "backbone": self.backbone,
            "state_dict": _cast(self.state_dict(), half),
            "snapshots": [_cast(snapshot, half) for snapshot in self.snapshots],
            "extra": extra or {},
        }
        torch_save(state, path)

    @classmethod
    def load(cls, path: Path, parser: str | None = None, backbone: str | None = None) -> JointModel:
        """Rebuild a model; refuse it if it was trained with another parser or backbone."""
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint not found: {path}") from None
        except Exception as exc:
            raise CheckpointError(f"{path} is not a groundsearch checkpoint ({exc})") from None
        if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(
                f"{path} is not a groundsearch checkpoint (format {CHECKPOINT_FORMAT})"
            )
        check_origin(path, state, parser, backbone)
        config = JointConfig(**state["config"])
        vocab = Vocabulary.from_state_dict(state["vocab"])
        inv = state["inventory"]
        inventory = None
        if inv is not None:
            kind = {"RelationInventory": RelationInventory, "PositionInventory": PositionInventory}[
                inv["kind"]
            ]
            inventory = kind(tuple(inv["names"]))
        model = cls(config, vocab, inventory, state["parser"], state["backbone"])
        model.load_state_dict(_cast(state["state_dict"], False))
        model.snapshots = [_cast(snapshot, False) for snapshot in state.get("snapshots", [])]
        if config.encoder not in CHAR_ENCODERS:  # fine-tuned word vectors live in the encoder
            model.vocab = Vocabulary(vocab.words, model.encoder.embed.weight.detach().numpy())
        model.extra = state.get("extra", {})
        return model


def _cast(state: dict[str, torch.Tensor], half: bool) -> dict[str, torch.Tensor]:
    """Floating tensors of a state dict as float16 (``half``) or float32."""
    dtype = torch.float16 if half else torch.float32
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
