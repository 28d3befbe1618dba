"""Writing sentences from points of the joint space (Kiros, Salakhutdinov & Zemel 2014).

decoder = load_decoder(path, identity=checkpoint_identity(checkpoint))  # model.runtime.checkpoints
beams = decoder.generate(vectors, beam=3)            # [[Generated(text, score), …], …]
beams = rerank(vectors, beams, embed_texts)          # by the joint model's own score
"""

from groundsearch.model.runtime.captioning.artifact import DecoderError, load_decoder, save_decoder
from groundsearch.model.runtime.captioning.beam import BeamSettings, Generated
from groundsearch.model.runtime.captioning.decoder import CaptionDecoder, DecoderConfig
from groundsearch.model.runtime.captioning.rerank import rerank
from groundsearch.model.runtime.captioning.words import DecoderVocab, sentence, tokenize

__all__ = [
    "BeamSettings",
    "CaptionDecoder",
    "DecoderConfig",
    "DecoderError",
    "DecoderVocab",
    "Generated",
    "load_decoder",
    "rerank",
    "save_decoder",
    "sentence",
    "tokenize",
]
