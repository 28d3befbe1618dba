"""Saving and loading caption decoders (float16, a weights-only load), refused against
another joint model than the one whose identity and dimension they record."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from groundsearch.common.files import torch_read, torch_save
from groundsearch.model.runtime.captioning.decoder import CaptionDecoder, DecoderConfig
from groundsearch.model.runtime.captioning.words import DecoderVocab

DECODER_KIND = "caption-decoder"
DECODER_FORMAT = 1


class DecoderError(ValueError):
    """A decoder artifact that cannot be used here, with the reason."""


def save_decoder(
    decoder: CaptionDecoder,
    path: Path,
    joint: Mapping[str, str],
    extra: dict[str, Any] | None = None,
) -> None:
    """Write the decoder atomically, float16, recording the joint model's identity."""
    weights = {
        k: v.detach().to(torch.float16) if v.is_floating_point() else v.detach()
        for k, v in decoder.state_dict().items()
    }
    state = {"format": DECODER_FORMAT, "kind": DECODER_KIND, "config": asdict(decoder.config)}
    state.update(words=list(decoder.vocab.words), joint=dict(joint), state_dict=weights)
    torch_save({**state, "extra": extra or {}}, path)


def read_decoder_state(path: Path) -> dict[str, Any]:
    """The contents of a decoder artifact (DecoderError if it is none)."""
    state = torch_read(path, "caption decoder", DecoderError)
    if not isinstance(state, dict) or state.get("kind") != DECODER_KIND:
        raise DecoderError(f"{path} is not a caption decoder")
    if state.get("format") != DECODER_FORMAT:
        raise DecoderError(
            f"{path} is a caption decoder of format {state.get('format')}, "
            f"this version reads format {DECODER_FORMAT}"
        )
    return state


def restamp_decoder(path: Path, joint: Mapping[str, str]) -> None:
    """Record another joint model's identity in a decoder (in place, atomically), for a
    checkpoint whose joint part did not change (``set-concepts --decoder``)."""
    state = read_decoder_state(path)
    state["joint"] = dict(joint)
    torch_save(state, path)


def load_decoder(
    path: Path, identity: Mapping[str, str] | None = None, dim: int | None = None
) -> CaptionDecoder:
    """The decoder at ``path`` in eval mode; DecoderError if trained on another joint
    model than ``identity`` or for another ``dim`` (None: not checked)."""
    state = read_decoder_state(Path(path))
    if identity is not None and state["joint"] != dict(identity):
        raise DecoderError(
            f"{path} was trained on the joint model {state['joint']}, not on {dict(identity)}: "
            "it cannot read this model's vectors; train one with `groundsearch train-decoder`"
        )
    config = DecoderConfig(**state["config"])
    if dim is not None and config.dim != dim:
        raise DecoderError(f"{path} reads {config.dim}-d vectors, but this model's are {dim}-d")
    decoder = CaptionDecoder(config, DecoderVocab(tuple(state["words"])))
    decoder.load_state_dict({k: v.float() for k, v in state["state_dict"].items()})
    decoder.extra = dict(state.get("extra", {}))
    return decoder.eval()
