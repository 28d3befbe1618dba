"""Relevance: a calibrated probability that a hit matches its query.

A retrieval score ranks a query's hits, but its level says little about whether the best
of them is a match: "a giraffe" on a gallery without giraffes still gets a best photo,
scored in the range of real matches. The relevance model reads, for each hit, what is
known at query time and turns it into a probability:

- ``score``: the hit's inner product with the query (the served space: the joint cosine,
  the text's part scaled by 1 − ρ, plus the concept channel's);
- ``mean``: the mean of the query's top ``top`` scores (``top`` = 20) and ``lead``, its
  best score less that mean: the shape of the query's score distribution (a query many
  photos match scores high far down its list; a match stands out of the crowd, a guess
  does not);
- ``novelty``: the concept channel's novelty share ρ of a text query (how much of it the
  joint space never trained: ``model.runtime.concepts``); 0 for photo queries;
- ``log_words``: log(1 + the number of words of a text query); 0 for photo queries. A
  short query ("a cat") names a kind of thing many photos show, a caption-long one
  one scene: the same score means more for the first;
- ``evidence`` (a hit-level input, for text queries with a *nameable* noun): the
  probability the backbone's ImageNet classifier gives the hit photo's classes that are
  the query's nouns ("bird": its 59 bird classes), read from the photo's top 10 classes
  (``model.runtime.evidence``); ``log_evidence`` is log(0.01 + evidence).

One model per kind of query (``QUERY_KINDS``): the scores of a text against photos, a photo
against captions, a photo against photos and an arithmetic sum do not share a scale. Each
is a logistic regression on the standardised features, whose output is mapped through an
isotonic regression (piecewise linear between its thresholds, clipped at the ends), both
fitted with scikit-learn by ``groundsearch fit-relevance`` (``model.training.relevance``)
on Flickr8k dev. The fitted numbers are stored as JSON (``relevance.json`` in the
artifacts: no pickle) with the checkpoint they were fitted for, since the scores are
that checkpoint's, and the default threshold chosen on dev. Evaluating them needs only
numpy.

A fit whose score coefficient is not positive is refused. Without evidence every
feature but ``score`` is one value per query, so relevance never rises down a query's
ranking. Relevance never changes a hit's score or its place in the ranking.

**Evidence** (format 3). Each kind may also have an *evidence* model
(``RelevanceModel.evidence``: the same logistic + isotonic fit, on the hits of the dev
queries that have a nameable noun, reading ``evidence`` beside the query's features),
used for a query when its hits' evidence is passed (``predict(…, evidence=…)``); a
query without it (no nameable noun, no class probabilities stored for its hits) is
judged exactly as before by the kind's own model. Evidence is a hit's own, so with it
relevance **may rise down a ranking**: a dog photo ranked above a cat photo for "a cat"
can come out less relevant than it. Such a model must rise with the score *and* with the
evidence (both coefficients positive, refused at load otherwise): of two hits with the
same evidence the higher-ranked is at least as relevant, and of two with the same score
the one the classifier sees the noun in. ``evidence_threshold`` is the default
``min_relevance`` chosen on dev for queries judged with evidence (``threshold`` stays the
one without). A format-1 or format-2 file still loads, without evidence models.

**Small galleries.** ``mean`` and ``lead`` describe a query's top 20 scores out of a
gallery of a thousand photos (Flickr8k dev); a query with fewer than ``top`` scores (a
gallery of fewer than 20 photos) puts them out of the range they were fitted on (a caption
against its own photo among 8 came out 0.04). Each kind therefore also has a *score-only*
model (``small``: the same logistic + isotonic fit on the same dev hits, reading
``score`` alone), used for every query with fewer than ``top`` scores. Format 2 stores
them; a format-1 file (no score-only models) still loads, and then scores every query
with its full model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

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


class RelevanceError(ValueError):
    """A relevance file that cannot be used (unreadable, another format, inconsistent)."""


def features(
    scores: Sequence[float] | np.ndarray,
    novelty: float = 0.0,
    top: int = TOP,
    words: int = 0,
    evidence: Sequence[float] | np.ndarray | None = None,
) -> np.ndarray:
    """Every feature (``FEATURES``, columns) of each hit (rows) of one query, from its
    scores best first (at least its first ``top``, when the gallery holds that many), a
    text query's novelty share and its number of words, and each hit's evidence (0
    without)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size == 0:
        return np.zeros((0, len(FEATURES)))
    head = s[: max(top, 1)]
    mean = float(head.mean())
    best = float(head.max())
    if evidence is None:
        ev = np.zeros(s.size)
    else:
        ev = np.clip(np.asarray(evidence, np.float64).reshape(-1), 0.0, 1.0)
        if ev.shape != s.shape:
            raise ValueError(f"{ev.size} evidence values for {s.size} scores")
    return np.column_stack(
        [
            s,
            np.full(s.size, mean),
            np.full(s.size, best - mean),
            np.full(s.size, float(novelty)),
            np.full(s.size, np.log1p(max(words, 0))),
            ev,
            np.log(EVIDENCE_FLOOR + ev),
        ]
    )


@dataclass(frozen=True)
class KindModel:
    """One kind's fitted model: logistic regression on standardised features, then an
    isotonic map of its probability."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    iso_x: np.ndarray
    iso_y: np.ndarray

    def __post_init__(self) -> None:
        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
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
        falling = [
            f for f, c in zip(self.features, self.coef, strict=True) if f in RISING and c <= 0
        ]
        if falling:
            raise RelevanceError(f"a relevance model must rise with {falling[0]}")

    @property
    def reads_evidence(self) -> bool:
        return any(f in self.features for f in ("evidence", "log_evidence"))

    def logistic(self, table: np.ndarray) -> np.ndarray:
        """The logistic regression's probability for rows of ``features`` (all columns)."""
        cols = [FEATURES.index(f) for f in self.features]
        z = (table[:, cols] - self.mean) / self.scale @ self.coef + self.intercept
        return 1.0 / (1.0 + np.exp(-z))

    def predict(self, table: np.ndarray) -> np.ndarray:
        """Calibrated probabilities for rows of ``features`` (all columns)."""
        if table.shape[0] == 0:
            return np.zeros(0)
        p = np.interp(self.logistic(table), self.iso_x, self.iso_y)
        return np.clip(p, 0.0, 1.0)

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
    """Every kind's model, the checkpoint they were fitted for and the default threshold.

    Args:
        kinds: each kind's model (a kind without one has no relevance).
        threshold: the default ``min_relevance``: below it a hit is weak (chosen on dev).
        identity: the checkpoint the scores come from (``checkpoint_identity``).
        top: how many top scores the distribution features read.
        info: how it was fitted (data, command), kept for the record.
        small: each kind's score-only model, for queries with fewer than ``top`` scores
            (a kind without one uses its full model for them).
        evidence: each kind's evidence model, for queries whose hits' evidence is given
            (a kind without one ignores evidence).
        evidence_small: each kind's score-and-evidence model, for such queries with
            fewer than ``top`` scores (without one: the score-only model, no evidence).
        evidence_threshold: the default ``min_relevance`` for queries judged with
            evidence (None: ``threshold``).
        short_threshold: the default for queries of at most ``SHORT_WORDS`` words
            judged with evidence ("a cat", "snow": does the gallery hold one?), chosen on
            dev by the concept rule alone (None: ``evidence_threshold``).
    """

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
        unknown = [k for k in (*named, *(self.evidence_small or {})) if k not in QUERY_KINDS]
        if unknown:
            raise RelevanceError(f"unknown relevance kinds {unknown}")
        wide = [k for k, m in (self.small or {}).items() if m.features != SMALL_FEATURES]
        if wide:
            raise RelevanceError(
                f"the score-only relevance models of {wide} read more than the score"
            )
        blind = [
            k
            for k, m in (*(self.evidence or {}).items(), *(self.evidence_small or {}).items())
            if not m.reads_evidence
        ]
        if blind:
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
        """The relevance of each hit of one query of ``kind``, from its scores best
        first (pass at least its top ``top``), and for a text query its novelty share and
        number of words; KeyError for a kind without a model. A query with fewer than
        ``top`` scores (a gallery smaller than that) is scored by the kind's score-only
        model when it has one (``model_for``).

        ``evidence``: each hit's evidence for a text query with a nameable noun
        (``model.runtime.evidence``: ``NounClasses.evidence`` over the hits' top classes),
        or None (no nameable noun, or the hits' classes are unknown): the query is then
        judged exactly as without evidence models."""
        table = features(scores, novelty, self.top, words, evidence)
        return self.model_for(kind, table.shape[0], evidence is not None).predict(table)

    def model_for(self, kind: str, n_scores: int, evidence: bool = False) -> KindModel:
        """The model that scores a query of ``kind`` with ``n_scores`` scores: with
        ``evidence``, the kind's evidence model (its small one below ``top`` scores) when
        it has one; else the score-only one below ``top`` scores (when fitted), else the
        full one."""
        few = n_scores < self.top
        if evidence:
            chosen = (self.evidence_small if few else self.evidence) or {}
            if kind in chosen:
                return chosen[kind]
        small = (self.small or {}).get(kind)
        if small is not None and few:
            return small
        return self.kinds[kind]

    def default_threshold(self, evidence: bool = False, words: int = 0) -> float:
        """The default ``min_relevance``: for queries judged with evidence (when chosen
        for them; for a short one of 1 … ``SHORT_WORDS`` ``words`` its own) or without."""
        if evidence and self.short_threshold is not None and 0 < words <= SHORT_WORDS:
            return self.short_threshold
        if evidence and self.evidence_threshold is not None:
            return self.evidence_threshold
        return self.threshold

    def score_only(self) -> RelevanceModel:
        """The same model with every kind scored by its score-only model alone (to
        measure those on a split)."""
        return RelevanceModel(dict(self.small or {}), self.threshold, self.identity, self.top)

    def without_evidence(self) -> RelevanceModel:
        """The same model without its evidence models (how it judges without them)."""
        return RelevanceModel(
            self.kinds, self.threshold, self.identity, self.top, self.info, self.small
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "identity": dict(self.identity),
            "threshold": self.threshold,
            "evidence_threshold": self.evidence_threshold,
            "short_threshold": self.short_threshold,
            "top": self.top,
            "kinds": {k: m.to_dict() for k, m in self.kinds.items()},
            "small": {k: m.to_dict() for k, m in (self.small or {}).items()},
            "evidence": {k: m.to_dict() for k, m in (self.evidence or {}).items()},
            "evidence_small": {k: m.to_dict() for k, m in (self.evidence_small or {}).items()},
            "info": dict(self.info or {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RelevanceModel:
        if not isinstance(d, Mapping) or d.get("format") not in READABLE:
            raise RelevanceError(
                f"not a relevance model of format {' or '.join(map(str, READABLE))}"
            )
        try:
            return cls(
                kinds={k: KindModel.from_dict(m) for k, m in d["kinds"].items()},
                threshold=float(d["threshold"]),
                identity={str(k): str(v) for k, v in d["identity"].items()},
                top=int(d["top"]),
                info=d.get("info") or {},
                small={k: KindModel.from_dict(m) for k, m in (d.get("small") or {}).items()},
                evidence={k: KindModel.from_dict(m) for k, m in (d.get("evidence") or {}).items()},
                evidence_small={
                    k: KindModel.from_dict(m) for k, m in (d.get("evidence_small") or {}).items()
                },
                evidence_threshold=(
                    None if d.get("evidence_threshold") is None else float(d["evidence_threshold"])
                ),
                short_threshold=(
                    None if d.get("short_threshold") is None else float(d["short_threshold"])
                ),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise RelevanceError(f"a relevance model is malformed: {exc!r}") from None

    def save(self, path: Path) -> None:
        from groundsearch.common.files import atomic_path

        with atomic_path(Path(path)) as tmp:
            Path(tmp).write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")


def load_relevance(path: Path, identity: Mapping[str, str] | None = None) -> RelevanceModel:
    """The relevance model in ``path`` (JSON); RelevanceError if it cannot be read, or,
    with ``identity``, was fitted for another checkpoint."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RelevanceError(f"cannot read relevance model {path}: {exc}") from None
    model = RelevanceModel.from_dict(data)
    if identity is not None and dict(model.identity) != dict(identity):
        raise RelevanceError(f"{path} was fitted for another checkpoint")
    return model


def word_count(text: str) -> int:
    """The words of a text query as ``log_words`` counts them: its space-separated
    tokens with a letter or digit (so "A dog runs ." and "A dog runs." both have 3)."""
    return sum(any(ch.isalnum() for ch in token) for token in text.split())


def novelty_of(vector: np.ndarray, channel_columns: int) -> float:
    """ρ of a text query, read off its vector: a normalised ``JointEmbedder`` scales the
    text's unit joint part by 1 − ρ (``model.runtime.embedder``), so ρ = 1 − its norm.
    0 without a concept channel."""
    if channel_columns <= 0:
        return 0.0
    joint = np.asarray(vector, np.float64).reshape(-1)[:-channel_columns]
    return float(np.clip(1.0 - np.linalg.norm(joint), 0.0, 1.0))
