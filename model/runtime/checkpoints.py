"""Checkpoint formats, identity, errors and origin checks: every model file goes through here.
A joint model or the kCCA baseline (tensors only), refused against another parser or backbone."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from groundsearch.common.files import sha256_file, torch_read, torch_save
from groundsearch.model.runtime.concepts import ConceptChannel, ConceptConfig
from groundsearch.model.runtime.embedder import JointEmbedder
from groundsearch.model.runtime.encoders.registry import INVENTORIES
from groundsearch.model.runtime.joint import JointConfig, JointModel, cast_state
from groundsearch.model.runtime.kcca import KCCAModel, KernelProjection
from groundsearch.model.runtime.text.vocab import Vocabulary

JOINT_FORMAT = 1
KCCA_FORMAT = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used here, with the reason."""


def checkpoint_identity(checkpoint: Path) -> dict[str, str]:
    """What vectors made with a checkpoint depend on: its bytes' SHA-256."""
    try:
        return {"checkpoint_sha256": sha256_file(checkpoint)}
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {checkpoint}: {exc.strerror}") from None


def check_origin(
    path: Path, state: dict[str, Any], parser: str | None, backbone: str | None, made: str
) -> None:
    """CheckpointError if ``state`` was made with another parser or backbone."""
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


def load_checkpoint(
    path: Path,
    parser: str | None = None,
    backbone: str | None = None,
    concept_weight: float | None = None,
) -> JointEmbedder | KCCAModel:
    """The model saved at ``path`` (either format), ready to embed, with the concept
    channel the checkpoint records (``concept_weight`` overrides its weight; 0: off)."""
    if (state := _read_kcca_state(path)) is not None:
        if concept_weight:
            raise CheckpointError(f"{path} is a KCCA model: it has no concept channel")
        return _kcca_from_state(state, path, parser, backbone)
    model = load_joint(path, parser=parser, backbone=backbone)
    normalize = bool(model.extra.get("train", {}).get("normalize", False))
    config = concept_config(model.extra, concept_weight)
    trained = model.extra.get("word_counts") or model.vocab.words[1:]
    channel = ConceptChannel(model.backbone, config, trained) if config.weight > 0 else None
    return JointEmbedder(model, normalize, channel)


def concept_config(extra: dict[str, Any], weight: float | None = None) -> ConceptConfig:
    """The concept channel a checkpoint's extras record, the weight overridden if given."""
    recorded = extra.get("concepts") or {}
    try:
        config = ConceptConfig(**recorded)
        return config if weight is None else replace(config, weight=weight)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"bad concept channel {recorded} (weight {weight}): {exc}") from exc


def record_concepts(path: Path, out: Path, **changes: Any) -> ConceptConfig:
    """Write ``path`` to ``out`` with its concept channel's settings changed (``weight``,
    ``names``, ``halfway``, …): the weights and everything else are copied as they are."""
    state = _read_joint_state(path)
    extra = dict(state.get("extra") or {})
    try:
        config = replace(concept_config(extra), **changes)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"bad concept channel setting {changes}: {exc}") from None
    state["extra"] = {**extra, "concepts": asdict(config)}
    torch_save(state, out)
    return config


def save_joint(
    model: JointModel, path: Path, extra: dict[str, Any] | None = None, half: bool = False
) -> None:
    """Write the checkpoint atomically; ``half`` stores the weights as float16 and the
    snapshots' in 8 bits (``pack_snapshot``; they are float32 again once loaded)."""
    vocab = model.vocab.state_dict()
    if model.spec.uses_words and WORD_TABLE in model.state_dict():  # its word table holds them
        vocab["vectors"] = None
    elif half:
        vocab["vectors"] = np.asarray(vocab["vectors"], dtype=np.float16)
    inv = model.inventory
    inventory = None if inv is None else {"kind": type(inv).__name__, "names": list(inv.names)}
    state = {
        "format": JOINT_FORMAT,
        "config": model.config.to_dict(),
        "vocab": vocab,
        "inventory": inventory,
        "parser": model.parser,
        "backbone": model.backbone,
        "state_dict": cast_state(model.state_dict(), half),
        "snapshots": [pack_snapshot(s) if half else cast_state(s, False) for s in model.snapshots],
        "extra": extra or {},
    }
    torch_save(state, path)


#: The state-dict entry of a word-level encoder's word vectors.
WORD_TABLE = "encoder.embed.weight"


def pack_snapshot(state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """A snapshot's weights in 8 bits: each matrix row as int8 steps of its own float16
    scale (largest magnitude / 127); vectors and integers as they are (float16)."""
    packed: dict[str, Any] = {}
    for name, value in state.items():
        if not value.is_floating_point() or value.dim() < 2:
            packed[name] = value.half() if value.is_floating_point() else value
            continue
        scale = value.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / 127
        packed[name] = {"int8": torch.round(value / scale).to(torch.int8), "scale": scale.half()}
    return packed


def unpack_snapshot(packed: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The float32 weights of a snapshot, packed (``pack_snapshot``) or as tensors."""
    return {
        name: value["int8"].float() * value["scale"].float()
        if isinstance(value, dict)
        else (value.float() if value.is_floating_point() else value)
        for name, value in packed.items()
    }


def _read_joint_state(path: Path) -> dict[str, Any]:
    # weights_only=False: a joint checkpoint holds arrays a weights-only load refuses
    state = torch_read(path, "groundsearch checkpoint", CheckpointError, weights_only=False)
    if not isinstance(state, dict) or state.get("format") != JOINT_FORMAT:
        raise CheckpointError(f"{path} is not a groundsearch checkpoint (format {JOINT_FORMAT})")
    return state


def load_joint(path: Path, parser: str | None = None, backbone: str | None = None) -> JointModel:
    """Rebuild a joint model; refuse it if it was trained with another parser or backbone."""
    state = _read_joint_state(path)
    check_origin(path, state, parser, backbone, made="trained")
    try:
        config = JointConfig.from_dict(state["config"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path} has a bad model config: {exc}") from None
    words = state["vocab"]
    if words.get("vectors") is None:  # kept once, as the encoder's word table
        words = {**words, "vectors": state["state_dict"][WORD_TABLE].float().numpy()}
    vocab = Vocabulary.from_state_dict(words)
    inv = state["inventory"]
    inventory = None if inv is None else INVENTORIES[inv["kind"]](tuple(inv["names"]))
    model = JointModel(config, vocab, inventory, state["parser"], state["backbone"])
    model.load_state_dict(cast_state(state["state_dict"], False))
    model.snapshots = [unpack_snapshot(snapshot) for snapshot in state.get("snapshots", [])]
    if model.spec.uses_words:  # fine-tuned word vectors live in the encoder
        embed = model.encoder.embed.weight.detach().numpy()  # type: ignore[union-attr,operator]
        model.vocab = Vocabulary(vocab.words, embed)
    model.extra = state.get("extra", {})
    return model


def save_kcca(model: KCCAModel, path: Path, extra: dict[str, Any] | None = None) -> None:
    """Write a kCCA checkpoint atomically (tensors and plain values only)."""
    vocab = {"words": list(model.vocab.words), "vectors": torch.from_numpy(model.vocab.vectors)}
    state = {"format": KCCA_FORMAT, "kind": model.kind, "config": model.config, "vocab": vocab}
    state.update(sentences=model.sentences.state(), images=model.images.state())
    state.update(parser=model.parser, backbone=model.backbone, extra=extra or {})
    torch_save(state, path)


def _read_kcca_state(path: Path) -> dict[str, Any] | None:
    """A kCCA checkpoint's contents, or None for any other file that exists."""
    try:
        state = torch_read(path, "groundsearch checkpoint", CheckpointError)
    except CheckpointError:
        if not Path(path).exists():
            raise
        return None
    return state if isinstance(state, dict) and state.get("kind") == KCCAModel.kind else None


def _kcca_from_state(
    state: dict[str, Any], path: Path, parser: str | None, backbone: str | None
) -> KCCAModel:
    if state.get("format") != KCCA_FORMAT:
        raise CheckpointError(
            f"{path} is a kCCA checkpoint of format {state.get('format')}, "
            f"this version reads format {KCCA_FORMAT}"
        )
    check_origin(path, state, parser, backbone, made="fitted")
    vocab = Vocabulary(list(state["vocab"]["words"]), state["vocab"]["vectors"].numpy())
    sentences, images = (KernelProjection.from_state(state[k]) for k in ("sentences", "images"))
    origin = (state["parser"], state["backbone"])
    model = KCCAModel(sentences, images, vocab, *origin, dict(state["config"]))
    model.extra = dict(state.get("extra", {}))
    return model
