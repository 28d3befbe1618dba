"""Written sentences: the caption decoder (Kiros et al. 2014) writes words for a vector.

``served_decoder`` picks the decoder the settings name (the shipped one is skipped, not an
error, when another checkpoint is served); ``Writer`` writes for ``/describe``,
``/paraphrase`` and ``/arithmetic?sentence=true``, re-ranking the beam by how close each
sentence's own vector (through the text front door) is to the vector written for.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from groundsearch.model.runtime.captioning import (
    CaptionDecoder,
    DecoderError,
    Generated,
    load_decoder,
    rerank,
)
from groundsearch.model.runtime.sentences import Sentences
from groundsearch.service.settings import ServiceSettings
from groundsearch.service.timing import Stages, Timings

log = logging.getLogger("groundsearch.service")


class NoDecoder(RuntimeError):
    """A written sentence was asked for, but the server has no caption decoder (501)."""


def served_decoder(
    settings: ServiceSettings, identity: dict[str, str]
) -> tuple[CaptionDecoder | None, str]:
    """The caption decoder and a line for ``/ready``. The shipped decoder is skipped when
    it was trained on another checkpoint; a decoder file named in the settings must
    match, or the server does not start."""
    if settings.decoder == "none":
        return None, "none"
    default = settings.decoder == "default"
    path = settings.default_decoder if default else Path(settings.decoder)
    if default and not path.exists():
        return None, "none (no shipped decoder)"
    try:
        decoder = load_decoder(path, identity)
    except DecoderError as exc:
        if not default:
            raise
        log.warning("caption decoder off: %s", exc)
        return None, "off: the shipped decoder was trained on another checkpoint"
    return decoder, f"{path.name} (beam {settings.decoder_beam})"


class Writer:
    """Sentences the decoder writes for joint-space vectors (NoDecoder without one)."""

    def __init__(
        self,
        decoder: CaptionDecoder | None,
        status: str,
        door: Sentences,
        stages: Stages,
        beam: int,
        rerank: bool,
    ) -> None:
        self.decoder, self.status, self.door, self.stages = decoder, status, door, stages
        self.beam, self.rerank = beam, rerank

    def require(self) -> CaptionDecoder:
        """The caption decoder; NoDecoder (501) if the server has none."""
        if self.decoder is None:
            raise NoDecoder(f"this server writes no sentences (caption decoder: {self.status})")
        return self.decoder

    def write(self, vec: np.ndarray, timings: Timings, beam: int | None = None) -> list[Generated]:
        """Sentences written for ``vec``, best first."""
        decoder = self.require()
        with self.stages.stage("generate", timings):
            beams = decoder.generate(vec[None], beam=beam or self.beam)
        if self.rerank and beams[0]:
            with self.stages.stage("rerank", timings):
                beams = rerank(vec[None], beams, self.door.vectors)
        return beams[0]
