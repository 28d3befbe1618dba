"""Written sentences: the caption decoder (Kiros et al. 2014) writes words for a vector;
``Captioner`` writes for ``/describe``, ``/paraphrase`` and ``/arithmetic``."""

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
from groundsearch.model.runtime.captioning.novel import NovelWords, Seen
from groundsearch.model.runtime.captioning.words import tokenize
from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.sentences import Sentences
from groundsearch.model.runtime.tagger import FILE_NAME, TaggerError, WordTagger
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.core.timing import Stages, Timings

log = logging.getLogger("groundsearch.service")

#: ``/describe``'s ``concepts``: the classifier's top classes at this probability or more.
CONCEPT_FLOOR = 0.05
CONCEPT_TOP = 5


def served_captioner(
    settings: ServiceSettings,
    identity: dict[str, str],
    model: Embedder,
    sentences: Sentences,
    stages: Stages,
) -> Captioner:
    """The served decoder, with ``NovelWords`` and re-ranking through ``sentences``."""
    decoder, status = served_decoder(settings, identity)
    novel = NovelWords.for_decoder(
        decoder if settings.decoder_novel else None,
        model.backbone,
        tagger=caption_tagger(settings, model.backbone) if settings.decoder_novel else None,
    )
    return Captioner(
        decoder, status, sentences, stages, settings.decoder_beam, settings.decoder_rerank, novel
    )


def caption_tagger(settings: ServiceSettings, backbone: str) -> WordTagger | None:
    """The word tagger beside the decoder file, else the model directory's, when it reads
    ``backbone``'s features."""
    try:
        return WordTagger.load(
            settings.companion(decoder_path(settings), FILE_NAME), backbone=backbone
        )
    except TaggerError as e:
        log.warning("captions without the word tagger: %s", e)
        return None


class NoDecoder(RuntimeError):
    """A written sentence was asked for, but the server has no caption decoder (501)."""


def decoder_path(settings: ServiceSettings) -> Path | None:
    """The decoder file the settings name (None: 'none')."""
    if settings.decoder == "none":
        return None
    return settings.default_decoder if settings.decoder == "default" else Path(settings.decoder)


def served_decoder(
    settings: ServiceSettings, identity: dict[str, str]
) -> tuple[CaptionDecoder | None, str]:
    """The caption decoder and a line for ``/ready``."""
    path = decoder_path(settings)
    if path is None:
        return None, "none"
    default = settings.decoder == "default"
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


class Captioner:
    """Sentences the decoder writes for joint-space vectors (NoDecoder without one)."""

    def __init__(
        self,
        decoder: CaptionDecoder | None,
        status: str,
        door: Sentences,
        stages: Stages,
        beam: int,
        rerank: bool,
        novel: NovelWords | None = None,
    ) -> None:
        self.decoder, self.status, self.door, self.stages = decoder, status, door, stages
        self.beam, self.rerank = beam, rerank
        #: the classifier's words (None: sentences are never constrained, no concepts)
        self.novel = novel

    def require(self) -> CaptionDecoder:
        """The caption decoder; NoDecoder (501) if the server has none."""
        if self.decoder is None:
            raise NoDecoder(f"this server writes no sentences (caption decoder: {self.status})")
        return self.decoder

    def write(
        self,
        vec: np.ndarray,
        timings: Timings,
        beam: int | None = None,
        features: np.ndarray | None = None,
    ) -> list[Generated]:
        """Sentences for ``vec``, best first; with ``features``, the best naming a word."""
        decoder = self.require()
        constraints, wanted = None, set()
        if features is not None and self.novel is not None and self.novel.decoder is decoder:
            with self.stages.stage("classify", timings):
                words = self.novel.confident(features[None])
                constraints = self.novel.as_constraints(words)
            wanted = set(words[0])
        with self.stages.stage("generate", timings):
            beams = decoder.generate(vec[None], beam=beam or self.beam, constraints=constraints)
        if self.rerank and beams[0]:
            with self.stages.stage("rerank", timings):
                beams = rerank(vec[None], beams, self.door.vectors)
            if wanted:  # the sentences that name a confident word stay first
                beams[0].sort(key=lambda g: not wanted & set(tokenize(g.text)))
        return beams[0]

    def concepts(self, features: np.ndarray) -> list[Seen]:
        """What the classifier saw in a photo (its features): the top classes."""
        if self.novel is None:
            return []
        return self.novel.seen(features[None], floor=CONCEPT_FLOOR, top=CONCEPT_TOP)[0]
