"""The joint space: a sentence encoder (by name, ``encoders.registry``) for captions and
``v = W_I z`` for images; saving and loading is ``model.runtime.checkpoints``."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np
import torch
from torch import nn

from groundsearch.model.runtime.encoders.recurrent import CharInventory, char_batch
from groundsearch.model.runtime.encoders.registry import ENCODERS as ENCODER_SPECS
from groundsearch.model.runtime.encoders.registry import (
    EncoderOptions,
    Inventory,
    encoder_options,
    encoder_spec,
    option_names,
)
from groundsearch.model.runtime.encoders.sequence import word_batch
from groundsearch.model.runtime.encoders.tree_batch import make_batch
from groundsearch.model.runtime.encoders.tree_rnn import StackedTreeRNN, TreeRNN
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.text.vocab import Vocabulary

#: Guards the lazy rebuild of snapshot-ensemble members.
_MEMBERS_LOCK = threading.Lock()
ENCODERS = sorted(ENCODER_SPECS)


@dataclass
class JointConfig:
    """Architecture of a joint model: what every encoder shares and the chosen encoder's
    own options, stored flat (``to_dict``)."""

    encoder: str = field(default="sdt-rnn", metadata={"help": "the sentence encoder"})
    hidden: int = field(default=50, metadata={"help": "size of the joint space"})
    image_dim: int = 1280
    sqrt_features: bool = field(default=False, metadata={"help": "square-root the CNN features"})
    image_hidden: int = field(
        default=0,
        metadata={
            "help": "images: a ReLU layer of this size beside W_I, v = W_I z + W_O relu(W_H z) "
            "(0: W_I alone, the paper's)"
        },
    )
    seed: int = 0
    #: The encoder's options; None: its defaults.
    options: EncoderOptions | None = None

    def __post_init__(self) -> None:
        spec = encoder_spec(self.encoder)  # ValueError naming the choices
        if self.image_hidden < 0:
            raise ValueError(
                f"image_hidden must be 0 (W_I alone) or a layer size, got {self.image_hidden}"
            )
        if self.options is None:
            self.options = spec.options()
        spec.options_of(self)  # ValueError if they are another family's

    def to_dict(self) -> dict[str, Any]:
        """The shared fields and the encoder's options, in one flat dict."""
        values = asdict(self)
        options = values.pop("options")
        return {**values, **options}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> JointConfig:
        """The config of a flat dict (an older one's other families' options are dropped)."""
        shared = {f.name for f in fields(cls)} - {"options"}
        if unknown := set(values) - shared - option_names():
            raise ValueError(f"unknown joint-model options {sorted(unknown)}")
        options = encoder_options(values.get("encoder", cls.encoder), values)
        return cls(**{k: v for k, v in values.items() if k in shared}, options=options)


def build_inventory(config: JointConfig, trees: Sequence[DependencyTree]) -> Inventory | None:
    """The matrix inventory a tree RNN needs (None for the other encoders)."""
    return encoder_spec(config.encoder).build_inventory(config, trees)


class JointModel(nn.Module):
    """Sentence encoder + image projection into one space of size ``config.hidden``."""

    def __init__(
        self,
        config: JointConfig,
        vocab: Vocabulary,
        inventory: Inventory | None,
        parser: str,
        backbone: str,
    ) -> None:
        super().__init__()
        self.config, self.vocab, self.inventory = config, vocab, inventory
        self.parser, self.backbone = parser, backbone
        self.spec = encoder_spec(config.encoder)
        self.encoder: nn.Module = self.spec.encoder(config, vocab, inventory)
        self.snapshots: list[dict[str, torch.Tensor]] = []
        #: What the checkpoint recorded beside the weights (e.g. the training summary).
        self.extra: dict[str, Any] = {}
        # (members, their tree RNNs stacked or None), rebuilt when the snapshots change; a
        # tuple, so that torch does not register the stacked module as a submodule
        self._ensemble: tuple[list[JointModel], StackedTreeRNN | None] = ([], None)
        g = torch.Generator().manual_seed(config.seed + 1)
        scale = 1.0 / np.sqrt(config.image_dim)
        self.W_I = nn.Parameter(scale * torch.randn(config.hidden, config.image_dim, generator=g))
        self.image_mlp: nn.Sequential | None = None
        if config.image_hidden:  # its output layer starts at zero: v starts as W_I z
            out = nn.Linear(config.image_hidden, config.hidden)
            nn.init.zeros_(out.weight)
            nn.init.zeros_(out.bias)
            hidden = nn.Linear(config.image_dim, config.image_hidden)
            self.image_mlp = nn.Sequential(hidden, nn.ReLU(), out)

    def prepare(self, trees: Sequence[DependencyTree]) -> Any:
        """The encoder's input batch for parsed captions."""
        if self.spec.input == "tree":
            if self.inventory is None or isinstance(self.inventory, CharInventory):
                return make_batch(trees, self.vocab, lambda t: [0] * len(t))
            return make_batch(trees, self.vocab, self.inventory.matrix_of)
        if self.spec.input == "chars":
            if isinstance(self.inventory, CharInventory):  # raw characters, case kept
                return self.inventory.batch([t.text for t in trees])
            return char_batch([t.text for t in trees])
        return word_batch([self.vocab.encode(t.words) for t in trees])

    def encode_sentences(self, trees: Sequence[DependencyTree]) -> torch.Tensor:
        return self.encoder(self.prepare(trees))

    def require_known_words(self, trees: Sequence[DependencyTree], what: str = "caption") -> None:
        """NoKnownWordError for a sentence with no word in the vocabulary (a word-level
        encoder could only give it the unknown word's vector); characters always count."""
        if self.spec.uses_words:
            self.vocab.require_known([t.words for t in trees], what)

    def members(self) -> list[JointModel]:
        """The models whose embeddings are combined: the snapshots, else this model alone."""
        return self._built_ensemble()[0]

    def _built_ensemble(self) -> tuple[list[JointModel], StackedTreeRNN | None]:
        """The snapshot members and, when they are tree RNNs, one module running them
        all at once (built once, under a lock: threads of a server may ask together)."""
        if not self.snapshots:
            return [self], None
        with _MEMBERS_LOCK:
            if len(self._ensemble[0]) != len(self.snapshots):
                args = (self.config, self.vocab, self.inventory, self.parser, self.backbone)
                members = []
                for state in self.snapshots:
                    member = JointModel(*args)
                    member.load_state_dict(state)
                    members.append(member.eval())
                trees = [m.encoder for m in members if isinstance(m.encoder, TreeRNN)]
                stack = len(members) > 1 and len(trees) == len(members)
                self._ensemble = (members, StackedTreeRNN(trees) if stack else None)
            return list(self._ensemble[0]), self._ensemble[1]

    @torch.no_grad()
    def embed_sentences(
        self, trees: Sequence[DependencyTree], normalize: bool, batch_size: int = 1000
    ) -> np.ndarray:
        """Caption embeddings: each member's (unit when ``normalize``) scaled by 1/√M and
        concatenated, so an inner product is the members' mean score."""
        members, stacked = self._built_ensemble()
        chunks = [trees[i : i + batch_size] for i in range(0, len(trees), batch_size)]
        if stacked is not None:
            roots = [stacked(self.prepare(chunk)) for chunk in chunks]
            return self._combine(list(torch.cat(roots, dim=1).unbind(0)), normalize)
        parts = []
        for member in members:
            member.eval()
            parts.append(torch.cat([member.encode_sentences(chunk) for chunk in chunks]))
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
        if z.ndim != 2 or z.shape[1] != (dim := self.config.image_dim):
            raise ValueError(f"image features must be N × {dim}, got {tuple(z.shape)}")
        if self.config.sqrt_features:  # power normalisation: damps dominant activations
            z = z.sign() * z.abs().sqrt()
        v = z @ self.W_I.T
        return v if self.image_mlp is None else v + self.image_mlp(z)


def cast_state(state: dict[str, torch.Tensor], half: bool) -> dict[str, torch.Tensor]:
    """Floating tensors of a state dict as float16 (``half``) or float32."""
    dtype = torch.float16 if half else torch.float32
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
