"""Short queries ranked by what the photo shows: the joint score fused with evidence.

The joint space, learned from whole sentences, ranks a word or two poorly ("a dog" can
put a panda above the dogs). For a query of n content words with a noun the evidence
reads (``model.runtime.evidence``), when the fusion has weights for n words, each
candidate's score becomes

    s + sd(s) · (w_c · z(logit c) + w_t · z(logit t) + w_o · z(logit o))

where ``z(x) = (x − mean(x)) / sd(x)`` over the query's candidates (unknown values: 0),
``c`` the classifier's probability of the nouns' classes among the photo's top classes,
``t`` the vector tagger's P(nouns | photo) and ``o`` the object detector's best score for
the nouns' COCO kinds (``model.runtime.objects``), each clipped to [``FLOOR``, 1 −
``FLOOR``]. It orders as ``z(s) + Σ w z(logit …)`` does and keeps the score's scale, so a
relevance model reads it as a score. Each query length has its own weights, chosen on
the mixed dev (``model.training.fusion``) and stored in ``fusion.json`` with the
checkpoint they were chosen for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from groundsearch.common.files import read_json, write_json
from groundsearch.model.runtime.concepts import FUNCTION_TAGS
from groundsearch.model.runtime.parsing.tree import DependencyTree

FILE_NAME = "fusion.json"
FORMAT = 1
#: Evidence is clipped to [FLOOR, 1 − FLOOR] before its logit (a class outside a photo's
#: top 10 reads 0).
FLOOR = 1e-3


class FusionError(ValueError):
    """A fusion file that cannot be used (unreadable, malformed, another checkpoint)."""


def content_words(tree: DependencyTree) -> int:
    """How many of a parsed query's words carry content ("a dog on the bed": 2)."""
    return sum(n.upos not in FUNCTION_TAGS for n in tree)


def logit(p: np.ndarray) -> np.ndarray:
    """``log(p / (1 − p))`` of probabilities clipped to [FLOOR, 1 − FLOOR] (NaN stays)."""
    q = np.clip(np.asarray(p, np.float64), FLOOR, 1 - FLOOR)
    return np.log(q / (1 - q))


def standardised(values: np.ndarray) -> np.ndarray:
    """``(x − mean) / sd`` over the known (finite) values; unknowns and a constant row give 0."""
    x = np.asarray(values, np.float64)
    known = np.isfinite(x)
    out = np.zeros(x.shape)
    if known.sum() >= 2 and (sd := x[known].std()) > 0:
        out[known] = (x[known] - x[known].mean()) / sd
    return out


def ranked_relevance(relevance: np.ndarray) -> np.ndarray:
    """A fused ranking's relevance as the page shows it: each hit's at least that of any
    hit below it (NaN ignored). The fusion orders short queries better than the relevance
    (which reads the joint score), so the good matches are the ranking's first hits and the
    page lists them in its order; the best, and so "no match", is unchanged."""
    r = np.asarray(relevance, np.float64)
    return np.fmax.accumulate(r[::-1])[::-1] if r.size else r.copy()


#: The weights of the classifier's, the tagger's and the detector's evidence (``CHANNELS``)
#: for one query length.
Weights = tuple[float, float, float]
CHANNELS = ("classes", "tagger", "objects")


@dataclass(frozen=True)
class Fusion:
    """The (classifier, tagger, detector) weights for queries of 1, 2, … content words
    (``weights[n − 1]``; longer queries are not fused), chosen for ``identity``."""

    weights: tuple[Weights, ...]
    identity: Mapping[str, str] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        flat = [w for pair in self.weights for w in pair]
        if any(len(pair) != len(CHANNELS) for pair in self.weights):
            raise FusionError(f"each query length has a weight for each of {CHANNELS}")
        if not all(np.isfinite(w) for w in flat):
            raise FusionError("the fusion weights must be finite numbers")
        if any(w < 0 for w in flat):
            raise FusionError("the fusion weights must not be negative")

    @property
    def max_words(self) -> int:
        """The longest query (content words) fused."""
        return max((n + 1 for n, pair in enumerate(self.weights) if any(pair)), default=0)

    def applies(self, words: int, nouns: int) -> bool:
        """Whether a query of ``words`` content words with ``nouns`` evidence nouns is fused."""
        return 0 < words <= len(self.weights) and nouns > 0 and any(self.weights[words - 1])

    def weighs_objects(self, words: int) -> bool:
        """Whether the detector's channel counts for a query of ``words`` content words."""
        return 0 < words <= len(self.weights) and self.weights[words - 1][2] > 0

    def fuse(
        self,
        scores: np.ndarray,
        classes: np.ndarray | None = None,
        tagger: np.ndarray | None = None,
        words: int = 1,
        objects: np.ndarray | None = None,
    ) -> np.ndarray:
        """The fused scores of a query of ``words`` content words' candidates from their
        joint ``scores`` and evidence (each None without, NaN where unknown); -inf scores
        (left out) stay -inf."""
        s = np.asarray(scores, np.float64)
        kept = np.isfinite(s)
        if kept.sum() < 2 or not 0 < words <= len(self.weights):
            return s.copy()
        push = np.zeros(s.shape)
        channels = (classes, tagger, objects)
        for weight, values in zip(self.weights[words - 1], channels, strict=True):
            if weight and values is not None:
                push += weight * standardised(np.where(kept, logit(values), np.nan))
        return np.where(kept, s + float(s[kept].std()) * push, s)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "identity": dict(self.identity),
            "weights": [dict(zip(CHANNELS, w, strict=True)) for w in self.weights],
            "info": dict(self.info),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Fusion:
        if not isinstance(d, Mapping) or d.get("format") != FORMAT:
            raise FusionError(f"not a fusion file of format {FORMAT}")
        try:
            return cls(
                tuple(
                    (float(w["classes"]), float(w["tagger"]), float(w.get("objects", 0.0)))
                    for w in d["weights"]
                ),
                {str(k): str(v) for k, v in d["identity"].items()},
                dict(d.get("info") or {}),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, FusionError):
                raise
            raise FusionError(f"a fusion file is malformed: {exc!r}") from None

    def save(self, path: Path) -> None:
        write_json(path, self.to_dict())


def load_fusion(path: Path, identity: Mapping[str, str] | None = None) -> Fusion:
    """The fusion in ``path``; FusionError if unreadable or chosen for another ``identity``."""
    fusion = Fusion.from_dict(read_json(path, "fusion file", FusionError))
    if identity is not None and dict(fusion.identity) != dict(identity):
        raise FusionError(f"{path} was chosen for another checkpoint")
    return fusion
