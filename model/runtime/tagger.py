"""The word tagger: which of Flickr8k's caption nouns a photo shows (snow, a beach: no
ImageNet class), one logistic regression per frequent noun over the pooled CNN features
(DCC's lexical classifier, Hendricks et al. 2016)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

FILE_NAME = "word_tagger.npz"
#: The tagger of the shipped checkpoint's photo vectors (relevance evidence).
VECTORS_FILE_NAME = "vector_tagger.npz"


#: (weights: rows × d) → photos × rows: each photo's inner product with each row.
Products = Callable[[np.ndarray], np.ndarray]


def row_products(vectors: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``vectors @ weights.T`` (photos × rows) for a few rows: one matrix-vector product
    a row, several times faster than BLAS's matrix product for so thin a matrix."""
    z, w = np.asarray(vectors, np.float32), np.asarray(weights, np.float32)
    if not len(w):
        return np.zeros((len(z), 0), np.float32)
    return np.stack([z @ row for row in w], axis=1)


def _sigmoid(logits: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(logits, -30, 30)))


def vectors_identity(checkpoint: Mapping[str, str]) -> str:
    """What a tagger of a checkpoint's photo vectors reads (its ``backbone``)."""
    return "vectors:" + checkpoint["checkpoint_sha256"]


class TaggerError(ValueError):
    """A tagger file that cannot be used (missing, malformed, another backbone)."""


def default_path(name: str = FILE_NAME) -> Path:
    """A shipped tagger (default: ``model/artifacts/word_tagger.npz``)."""
    return Path(__file__).resolve().parents[1] / "artifacts" / name


@dataclass(frozen=True)
class WordTagger:
    """``sigmoid(((z − mean) / scale) · weightᵀ + bias)`` for pooled features ``z`` of
    ``backbone``: one row per noun of ``words`` (with its ``lemmas``)."""

    words: tuple[str, ...]
    backbone: str
    mean: np.ndarray
    scale: np.ndarray
    weight: np.ndarray
    bias: np.ndarray
    lemmas: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.lemmas:
            object.__setattr__(self, "lemmas", self.words)
        if len(self.lemmas) != len(self.words):
            raise TaggerError(f"{len(self.words)} words but {len(self.lemmas)} lemmas")
        d = self.mean.shape[0]
        if self.weight.shape != (len(self.words), d) or self.bias.shape != (len(self.words),):
            raise TaggerError(
                f"a tagger of {len(self.words)} words over {d} features has weight "
                f"{self.weight.shape} and bias {self.bias.shape}"
            )
        if self.scale.shape != (d,) or not np.all(self.scale > 0):
            raise TaggerError("the tagger's feature scales must be positive, one per feature")
        if len(set(self.words)) != len(self.words):
            raise TaggerError("the tagger names a word twice")

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def column(self, word: str) -> int | None:
        """The column of ``word`` (None: the tagger does not know it)."""
        return self._columns.get(word)

    def lemma_column(self, lemma: str) -> int | None:
        """The column of the word whose lemma is ``lemma`` (None: none)."""
        return self._lemma_columns.get(lemma)

    @cached_property
    def _columns(self) -> dict[str, int]:
        return {w: j for j, w in enumerate(self.words)}

    @cached_property
    def _lemma_columns(self) -> dict[str, int]:
        return {w: j for j, w in enumerate(self.lemmas)}

    def probabilities(
        self, features: np.ndarray, columns: Sequence[int] | None = None
    ) -> np.ndarray:
        """Each photo's probability of each word (or of the ``columns``), float32."""
        z = np.asarray(features, np.float32)
        if z.ndim != 2 or z.shape[1] != self.dim:
            raise TaggerError(f"features must be n × {self.dim}, got {z.shape}")
        if columns is None:
            logits = ((z - self.mean) / self.scale) @ self.weight.T + self.bias
        else:
            weights, biases = self.folded(columns)
            logits = row_products(z, weights) + biases
        return _sigmoid(logits).astype(np.float32)

    def folded(self, columns: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The ``columns``' weights (float32, a row each) and biases with the
        standardisation folded in: a photo's logits are ``z · weightsᵀ + biases``."""
        rows = list(columns)
        weights = np.ascontiguousarray(self.weight[rows] / self.scale, np.float32)
        return weights, (self.bias[rows] - weights @ self.mean).astype(np.float32)

    def of(self, words: Sequence[str], features: np.ndarray) -> np.ndarray:
        """The probabilities of ``words`` only (photos × len(words); 0 for an unknown word)."""
        p = self.probabilities(features)
        out = np.zeros((p.shape[0], len(words)), np.float32)
        for k, w in enumerate(words):
            if (j := self.column(w)) is not None:
                out[:, k] = p[:, j]
        return out

    def columns_of(self, lemmas: Sequence[str]) -> list[int]:
        """The columns of the words whose lemmas are among ``lemmas`` (a query's nouns)."""
        return [c for n in lemmas if (c := self.lemma_column(n)) is not None]

    def evidence(self, columns: Sequence[int], products: Products) -> np.ndarray:
        """Each photo's evidence for the tagged nouns ``columns``: the least of their
        probabilities (dev AUROC 0.91; 0.85 the largest, 0.89 the mean)."""
        weights, biases = self.folded(columns)
        logits = products(weights) + biases
        least = logits[:, 0]
        for j in range(1, logits.shape[1]):  # the sigmoid rises: the least logit's (a
            least = np.minimum(least, logits[:, j])  # column at a time: a row's min is slow)
        return _sigmoid(least).astype(np.float64)

    def subset(self, words: Sequence[str]) -> WordTagger:
        """The tagger of ``words`` only (each one it knows)."""
        rows = [self._columns[w] for w in words]
        lemmas = tuple(self.lemmas[j] for j in rows)
        return replace(
            self, words=tuple(words), weight=self.weight[rows], bias=self.bias[rows], lemmas=lemmas
        )

    def save(self, path: Path) -> None:
        """Write the tagger as one ``.npz`` (no pickle), the weight matrix in float16."""
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, Any] = {"weight": self.weight.astype(np.float16)}
        arrays |= {k: np.array(getattr(self, k)) for k in ("words", "lemmas", "backbone")}
        arrays |= {k: getattr(self, k).astype(np.float32) for k in ("mean", "scale", "bias")}
        with path.open("wb") as f:
            np.savez_compressed(f, **arrays)

    @classmethod
    def load(cls, path: Path | None = None, backbone: str | None = None) -> WordTagger:
        """Read a tagger (default: the shipped one), refusing another ``backbone``'s."""
        path = Path(path) if path is not None else default_path()
        try:
            with np.load(path, allow_pickle=False) as f:
                arrays = (f[k].astype(np.float32) for k in ("mean", "scale", "weight", "bias"))
                mean, scale, weight, bias = arrays
                lemmas = tuple(str(w) for w in f["lemmas"]) if "lemmas" in f else ()
                words, backbone_ = tuple(str(w) for w in f["words"]), str(f["backbone"])
                tagger = cls(words, backbone_, mean, scale, weight, bias, lemmas)
        except FileNotFoundError as e:
            raise TaggerError(f"no word tagger at {path}") from e
        except (KeyError, OSError, ValueError) as e:
            if isinstance(e, TaggerError):
                raise
            raise TaggerError(f"{path} is not a word tagger: {e}") from e
        if backbone is not None and tagger.backbone != backbone:
            raise TaggerError(f"{path} reads {tagger.backbone} features, the model uses {backbone}")
        return tagger
