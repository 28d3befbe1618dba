"""Re-ranking a beam by the joint model's own image–sentence score (Kiros et al. 2014);
the caller passes ``embed_texts`` (texts → joint-space vectors), keeping the parser out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from groundsearch.model.runtime.captioning.beam import Generated

EmbedTexts = Callable[[list[str]], np.ndarray]


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def rerank(
    vectors: np.ndarray,
    beams: Sequence[Sequence[Generated]],
    embed_texts: EmbedTexts,
    lm_weight: float = 0.0,
) -> list[list[Generated]]:
    """Each beam re-sorted by cosine(vector, sentence) + ``lm_weight`` × decoder score."""
    if len(vectors) != len(beams):
        raise ValueError(f"{len(vectors)} vectors but {len(beams)} beams")
    texts = [g.text for b in beams for g in b]
    if not texts:
        return [[] for _ in beams]
    embedded = _unit(embed_texts(texts))
    if len(embedded) != len(texts):
        raise ValueError(f"embed_texts gave {len(embedded)} vectors for {len(texts)} texts")
    units = _unit(vectors)
    out, at = [], 0
    for vector, beam in zip(units, beams, strict=True):
        cos = embedded[at : at + len(beam)] @ vector
        at += len(beam)
        pairs = zip(beam, cos, strict=True)
        scored = [Generated(g.text, float(c) + lm_weight * g.score) for g, c in pairs]
        out.append(sorted(scored, key=lambda g: -g.score))
    return out
