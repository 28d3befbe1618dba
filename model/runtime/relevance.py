"""Relevance: a calibrated probability that a hit matches its query.

A score ranks hits but its level says little ("a giraffe" in a gallery without giraffes
still gets a best photo). Each hit's ``FEATURES`` go through one model per kind of query
(``QUERY_KINDS``): a logistic regression mapped through an isotonic regression, fitted by
``groundsearch fit-relevance`` and stored as JSON with its checkpoint and default
threshold. Relevance never changes a score or rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from groundsearch.common.files import read_json, write_json

#: Kinds of query, each with its own fitted model.
QUERY_KINDS = ("text-image", "image-caption", "image-image", "arithmetic")
#: The features a model may use, in the order ``features`` computes them.
FEATURES = ("score", "mean", "lead", "novelty", "log_words", "evidence", "log_evidence")
#: How many of a query's top scores its distribution is read from.
TOP = 20
FORMAT = 3
#: Formats ``load_relevance`` reads (1: no score-only models; 2: no evidence models).
READABLE = (1, 2, 3)
#: The features of a kind's score-only model (``RelevanceModel.small``).
SMALL_FEATURES = ("score",)
#: The features that vary along a query's hits, each of which a model must rise with.
RISING = ("score", "evidence", "log_evidence")
#: A text query of at most this many words ("a cat", "red car", "snow") is *short*: with
#: evidence, its default threshold is ``RelevanceModel.short_threshold``.
SHORT_WORDS = 3
#: What ``log_evidence`` adds to the evidence before the log.
EVIDENCE_FLOOR = 0.01
#: The model tables of a relevance file.
MODEL_KEYS = ("kinds", "small", "evidence", "evidence_small")


class RelevanceError(ValueError):
    """A relevance file that cannot be used (unreadable, another format, inconsistent)."""


def feature_columns(
    scores: Sequence[float] | np.ndarray,
    novelty: float = 0.0,
    top: int = TOP,
    words: int = 0,
    evidence: Sequence[float] | np.ndarray | None = None,
) -> dict[str, np.ndarray | float]:
    """Each of ``FEATURES`` for one query's hits (in any order: ``mean`` and ``lead`` read
    the ``top`` largest scores): an array along the hits, or the query's one number."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    k = min(max(top, 1), s.size)  # the query's top scores, whatever the hits' order
    head = np.partition(s, s.size - k)[s.size - k :] if s.size else np.zeros(1)
    mean, best = float(head.mean()), float(head.max())
    ev: np.ndarray | float = 0.0
    if evidence is not None:
        ev = np.clip(np.asarray(evidence, np.float64).reshape(-1), 0.0, 1.0)
        if ev.shape != s.shape:
            raise ValueError(f"{ev.size} evidence values for {s.size} scores")
    return {
        "score": s,
        "mean": mean,
        "lead": best - mean,
        "novelty": float(novelty),
        "log_words": float(np.log1p(max(words, 0))),
        "evidence": ev,
        "log_evidence": np.log(EVIDENCE_FLOOR + ev),
    }


def features(
    scores: Sequence[float] | np.ndarray,
    novelty: float = 0.0,
    top: int = TOP,
    words: int = 0,
    evidence: Sequence[float] | np.ndarray | None = None,
) -> np.ndarray:
    """``FEATURES`` (columns) of each hit (rows) of one query (``feature_columns``)."""
    columns = feature_columns(scores, novelty, top, words, evidence)
    n = np.asarray(columns["score"]).size
    return np.column_stack([np.broadcast_to(columns[f], n) for f in FEATURES])


@dataclass(frozen=True)
class KindModel:
    """One kind's fitted model: a logistic regression, then an isotonic map."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    iso_x: np.ndarray
    iso_y: np.ndarray

    def __post_init__(self) -> None:
        if unknown := [f for f in self.features if f not in FEATURES]:
            raise RelevanceError(f"unknown relevance features {unknown}")
        n = len(self.features)
        if not (self.mean.shape == self.scale.shape == self.coef.shape == (n,)):
            raise RelevanceError("relevance coefficients do not match its features")
        if self.iso_x.ndim != 1 or self.iso_x.shape != self.iso_y.shape or self.iso_x.size < 1:
            raise RelevanceError("relevance isotonic thresholds are inconsistent")
        if np.any(np.diff(self.iso_x) < 0) or np.any(np.diff(self.iso_y) < 0):
            raise RelevanceError("relevance isotonic thresholds must be non-decreasing")
        if np.any(self.scale <= 0):
            raise RelevanceError("relevance feature scales must be positive")
        if "score" not in self.features or self.coef[self.features.index("score")] <= 0:
            raise RelevanceError("a relevance model must rise with the score")
        pairs = zip(self.features, self.coef, strict=True)
        if falling := [f for f, c in pairs if f in RISING and c <= 0]:
            raise RelevanceError(f"a relevance model must rise with {falling[0]}")

    @property
    def reads_evidence(self) -> bool:
        return any(f in self.features for f in ("evidence", "log_evidence"))

    def predict(self, table: np.ndarray) -> np.ndarray:
        """Calibrated probabilities for rows of ``features`` (all columns)."""
        columns = {f: table[:, FEATURES.index(f)] for f in self.features}
        return self.predict_columns(columns, table.shape[0])

    def predict_columns(self, columns: Mapping[str, np.ndarray | float], n: int) -> np.ndarray:
        """``predict`` for ``n`` hits from ``feature_columns`` (a query's own features
        summed once, not a table of them)."""
        if n == 0:
            return np.zeros(0)
        z: np.ndarray | float = self.intercept
        for f, mean, scale, coef in zip(
            self.features, self.mean, self.scale, self.coef, strict=True
        ):
            z = z + (columns[f] - mean) * (coef / scale)
        logistic = 1.0 / (1.0 + np.exp(-np.broadcast_to(z, n)))
        return np.clip(np.interp(logistic, self.iso_x, self.iso_y), 0.0, 1.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "coef": self.coef.tolist(),
            "intercept": self.intercept,
            "isotonic": {"x": self.iso_x.tolist(), "y": self.iso_y.tolist()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> KindModel:
        try:
            return cls(
                features=tuple(d["features"]),
                mean=np.asarray(d["mean"], np.float64),
                scale=np.asarray(d["scale"], np.float64),
                coef=np.asarray(d["coef"], np.float64),
                intercept=float(d["intercept"]),
                iso_x=np.asarray(d["isotonic"]["x"], np.float64),
                iso_y=np.asarray(d["isotonic"]["y"], np.float64),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, RelevanceError):
                raise
            raise RelevanceError(f"a relevance model is malformed: {exc!r}") from None


@dataclass(frozen=True)
class RelevanceModel:
    """Every kind's model, the checkpoint they were fitted for and the default
    ``min_relevance``; optionally score-only (``small``) and evidence models with their
    defaults (``short_threshold``: at most ``SHORT_WORDS`` words)."""

    kinds: Mapping[str, KindModel]
    threshold: float
    identity: Mapping[str, str]
    top: int = TOP
    info: Mapping[str, Any] | None = None
    small: Mapping[str, KindModel] | None = None
    evidence: Mapping[str, KindModel] | None = None
    evidence_small: Mapping[str, KindModel] | None = None
    evidence_threshold: float | None = None
    short_threshold: float | None = None

    def __post_init__(self) -> None:
        named = (*self.kinds, *(self.small or {}), *(self.evidence or {}))
        if unknown := [k for k in (*named, *(self.evidence_small or {})) if k not in QUERY_KINDS]:
            raise RelevanceError(f"unknown relevance kinds {unknown}")
        if wide := [k for k, m in (self.small or {}).items() if m.features != SMALL_FEATURES]:
            raise RelevanceError(
                f"the score-only relevance models of {wide} read more than the score"
            )
        evidence = (*(self.evidence or {}).items(), *(self.evidence_small or {}).items())
        if blind := [k for k, m in evidence if not m.reads_evidence]:
            raise RelevanceError(f"the evidence models of {blind} do not read the evidence")
        for t in (self.threshold, self.evidence_threshold, self.short_threshold):
            if t is not None and not 0.0 <= t <= 1.0:
                raise RelevanceError(f"the relevance threshold must be in [0, 1], got {t}")
        if self.top < 1:
            raise RelevanceError(f"top must be at least 1, got {self.top}")

    def predict(
        self,
        kind: str,
        scores: Sequence[float] | np.ndarray,
        novelty: float = 0.0,
        words: int = 0,
        evidence: Sequence[float] | np.ndarray | None = None,
    ) -> np.ndarray:
        """The relevance of each hit of one query of ``kind`` (``evidence`` None: judged
        without evidence models; a hit whose evidence is NaN, unknown, is judged as without);
        KeyError for a kind without a model."""
        columns = feature_columns(scores, novelty, self.top, words, evidence)
        n = np.asarray(columns["score"]).size
        p = self.model_for(kind, n, evidence is not None).predict_columns(columns, n)
        unknown = np.isnan(columns["evidence"])
        if np.any(unknown):
            p = np.where(unknown, self.predict(kind, scores, novelty, words), p)
        return p

    def model_for(self, kind: str, n_scores: int, evidence: bool = False) -> KindModel:
        """The model for a query of ``kind`` with ``n_scores`` scores: the evidence model,
        else (below ``top`` scores) the score-only one, else the full one, as fitted."""
        few = n_scores < self.top
        if evidence:
            chosen = (self.evidence_small if few else self.evidence) or {}
            if kind in chosen:
                return chosen[kind]
        small = (self.small or {}).get(kind)
        return small if small is not None and few else self.kinds[kind]

    def default_threshold(self, evidence: bool = False, words: int = 0) -> float:
        """The default ``min_relevance`` for a query judged with ``evidence`` or without."""
        if evidence and self.short_threshold is not None and 0 < words <= SHORT_WORDS:
            return self.short_threshold
        if evidence and self.evidence_threshold is not None:
            return self.evidence_threshold
        return self.threshold

    def score_only(self) -> RelevanceModel:
        """The same model with every kind scored by its score-only model alone."""
        return RelevanceModel(dict(self.small or {}), self.threshold, self.identity, self.top)

    def without_evidence(self) -> RelevanceModel:
        """The same model without its evidence models."""
        return RelevanceModel(
            self.kinds, self.threshold, self.identity, self.top, self.info, self.small
        )

    def to_dict(self) -> dict[str, Any]:
        models = {
            key: {k: m.to_dict() for k, m in (getattr(self, key) or {}).items()}
            for key in MODEL_KEYS
        }
        return {
            "format": FORMAT,
            "identity": dict(self.identity),
            "threshold": self.threshold,
            "evidence_threshold": self.evidence_threshold,
            "short_threshold": self.short_threshold,
            "top": self.top,
            **models,
            "info": dict(self.info or {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RelevanceModel:
        if not isinstance(d, Mapping) or d.get("format") not in READABLE:
            raise RelevanceError(
                f"not a relevance model of format {' or '.join(map(str, READABLE))}"
            )

        def models(key: str) -> dict[str, KindModel]:
            return {k: KindModel.from_dict(m) for k, m in (d.get(key) or {}).items()}

        def number(key: str) -> float | None:
            return None if d.get(key) is None else float(d[key])

        try:
            return cls(
                kinds={k: KindModel.from_dict(m) for k, m in d["kinds"].items()},
                threshold=float(d["threshold"]),
                identity={str(k): str(v) for k, v in d["identity"].items()},
                top=int(d["top"]),
                info=d.get("info") or {},
                small=models("small"),
                evidence=models("evidence"),
                evidence_small=models("evidence_small"),
                evidence_threshold=number("evidence_threshold"),
                short_threshold=number("short_threshold"),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise RelevanceError(f"a relevance model is malformed: {exc!r}") from None

    def save(self, path: Path) -> None:
        write_json(path, self.to_dict())


def load_relevance(path: Path, identity: Mapping[str, str] | None = None) -> RelevanceModel:
    """The relevance model in ``path``; RelevanceError if unreadable or for another ``identity``."""
    model = RelevanceModel.from_dict(read_json(path, "relevance model", RelevanceError))
    if identity is not None and dict(model.identity) != dict(identity):
        raise RelevanceError(f"{path} was fitted for another checkpoint")
    return model


def word_count(text: str) -> int:
    """The space-separated tokens with a letter or digit ("A dog runs ." has 3)."""
    return sum(any(ch.isalnum() for ch in token) for token in text.split())


def novelty_of(vector: np.ndarray, channel_columns: int) -> float:
    """ρ of a text query: 1 − the norm of its joint part (0 without a concept channel)."""
    if channel_columns <= 0:
        return 0.0
    joint = np.asarray(vector, np.float64).reshape(-1)[:-channel_columns]
    return float(np.clip(1.0 - np.linalg.norm(joint), 0.0, 1.0))
