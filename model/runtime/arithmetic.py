"""Embedding arithmetic (Kiros, Salakhutdinov & Zemel 2014): ``photo − "blue" + "red"``,
the same query for the service (``/arithmetic``) and the measured protocol."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1 (a zero vector stays zero)."""
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def arithmetic_query(
    base: np.ndarray,
    plus: Sequence[np.ndarray] = (),
    minus: Sequence[np.ndarray] = (),
    channel_columns: int = 0,
) -> np.ndarray:
    """The unit query ``base + Σ plus − Σ minus`` of joint-space vectors, the photo's last
    ``channel_columns`` (the concept channel) left out."""
    query = np.array(base, dtype=np.float32, copy=True)
    if channel_columns:
        query[..., -channel_columns:] = 0.0
    for vec in plus:
        query = query + vec
    for vec in minus:
        query = query - vec
    return unit(query)


def centre_rerank(vectors: np.ndarray, top: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Kiros et al.'s outlier filter: candidates (best first) re-sorted by similarity to
    the mean of the first ``top``; the new order and each one's score, in that order."""
    centre = vectors[:top].mean(axis=0)
    scores = vectors @ centre / max(float(np.linalg.norm(centre)), 1e-12)
    order = np.argsort(-scores, kind="stable")
    return order, scores[order]
