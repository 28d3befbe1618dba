"""Evidence: what the backbone's classifier says, on a hit photo, about a query's nouns.

A retrieval score cannot say whether the thing a query names is in the photo; the
backbone's classifier can, for the nouns its classes name (``noun_classes.tsv``), read
from the photo's ``TOP_CLASSES`` most probable classes (what a gallery stores). A query
with no nameable noun has no evidence (``None``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from groundsearch.model.runtime.concepts import FUNCTION_TAGS, NOUNS
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.relevance import TOP

if TYPE_CHECKING:
    from groundsearch.model.runtime.tagger import Products, WordTagger

FILE_NAME = "noun_classes.tsv"
#: How many of a photo's most probable classes the evidence reads.
TOP_CLASSES = 10
COLUMNS = ("noun", "classes")


def default_path(name: str = FILE_NAME) -> Path:
    """A shipped table (default: ``model/artifacts/noun_classes.tsv``)."""
    return Path(__file__).resolve().parents[1] / "artifacts" / name


def top_classes(probabilities: np.ndarray, k: int = TOP_CLASSES) -> tuple[np.ndarray, np.ndarray]:
    """Each photo's ``k`` most probable classes (int64) and their probabilities."""
    ids, probs = top_of(np.asarray(probabilities, np.float32), k)
    return ids.astype(np.int64), probs


def top_of(scores: np.ndarray, top: int = TOP) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``top`` largest columns, best first (ties by column), and their scores."""
    k = min(top, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    vals = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -vals), axis=1)
    idx = np.take_along_axis(part, order, axis=1)
    return idx, np.take_along_axis(scores, idx, axis=1)


#: A query's noun words as evidence reads them: (lemma, written form), lower case.
NounWords = tuple[tuple[str, str], ...]


def noun_words(tree: DependencyTree) -> NounWords:
    """A parsed query's nouns (else its content words) as unique (lemma, written form)."""
    nodes = [n for n in tree if n.upos in NOUNS] or [n for n in tree if n.upos not in FUNCTION_TAGS]
    return tuple(dict.fromkeys((n.lemma.lower(), n.text.lower()) for n in nodes))


def evidence_nouns(
    words: NounWords, table: NounClasses | None, tagger: WordTagger | None
) -> list[str]:
    """A query's nouns the classes name (``NounClasses.named``), then those the tagger tags."""
    named = table.named(words) if table is not None else []
    if tagger is not None:
        named += [lemma for lemma, _ in words if tagger.lemma_column(lemma) is not None]
    return list(dict.fromkeys(named))


def evidence_channels(
    nouns: Sequence[str],
    table: NounClasses | None = None,
    classes: tuple[np.ndarray, np.ndarray] | None = None,
    tagger: WordTagger | None = None,
    products: Products | None = None,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Each hit's evidence for ``nouns`` from the classifier (its best noun among the hit's
    top ``classes``; NaN without) and from the tagger (its worst noun); None: no channel."""
    if not nouns:
        return None, None
    named: np.ndarray | None = None
    tagged: np.ndarray | None = None
    if table is not None and classes is not None and table.nameable(nouns):
        ids, probs = classes
        if (named := table.evidence(nouns, ids, probs)) is not None:
            named = np.where(np.asarray(ids)[:, 0] < 0, np.nan, named)  # a row of -1: none
    if tagger is not None and products is not None and (cols := tagger.columns_of(nouns)):
        tagged = tagger.evidence(cols, products)
    return named, tagged


def joined(named: np.ndarray | None, tagged: np.ndarray | None) -> np.ndarray | None:
    """The larger of two channels' evidence (NaN where neither is known; None without)."""
    if named is None or tagged is None:
        return named if tagged is None else tagged
    return np.fmax(named, tagged)


def photo_classes(model: object, features: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The photos' ``top_classes`` by ``model``'s concept channel (None without one)."""
    channel = getattr(model, "concepts", None)
    if channel is None or len(features) == 0:
        return None
    return top_classes(channel.class_probabilities(features))


@dataclass(frozen=True)
class NounClasses:
    """Noun → the classes that are that thing (class indices of the classifier)."""

    classes: Mapping[str, frozenset[int]]

    @classmethod
    def load(cls, path: Path | None = None, n_classes: int = 1000) -> NounClasses:
        """The table at ``path`` (default: the shipped one); ValueError if malformed."""
        path = Path(path) if path is not None else default_path()
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader((ln for ln in f if not ln.startswith("#")), delimiter="\t"))
        if not rows or tuple(rows[0])[: len(COLUMNS)] != COLUMNS:
            raise ValueError(f"{path}: expected the columns {COLUMNS} first")
        table: dict[str, frozenset[int]] = {}
        for r in rows:
            noun = r["noun"]
            try:
                ids = frozenset(int(x) for x in r["classes"].split())
            except ValueError:
                raise ValueError(f"{path}: the classes of {noun!r} are not integers") from None
            if not noun.isalpha() or noun != noun.lower() or not ids:
                raise ValueError(f"{path}: a row is a lower-case word and its classes: {noun!r}")
            if min(ids) < 0 or max(ids) >= n_classes:
                raise ValueError(f"{path}: a class of {noun!r} is not one of {n_classes}")
            table[noun] = ids
        return cls(table)

    def __len__(self) -> int:
        return len(self.classes)

    def nameable(self, words: Iterable[str]) -> list[str]:
        """The words (lower-cased) that have classes, in order, each once."""
        return list(dict.fromkeys(w for w in (w.lower() for w in words) if w in self.classes))

    def nouns(self, tree: DependencyTree) -> list[str]:
        """A parsed query's nameable nouns (``named`` of its ``noun_words``)."""
        return self.named(noun_words(tree))

    def named(self, words: NounWords) -> list[str]:
        """The nameable of a query's noun words: its lemma, else its written form ("glasses")."""
        return self.nameable(
            lemma if lemma in self.classes or text not in self.classes else text
            for lemma, text in words
        )

    def evidence(
        self, nouns: Sequence[str], class_ids: np.ndarray, class_probs: np.ndarray
    ) -> np.ndarray | None:
        """Each hit's evidence from its top class ids and probabilities (hits × k; -1:
        no class); None when no noun has classes."""
        named = self.nameable(nouns)
        if not named:
            return None
        ids, probs = np.asarray(class_ids, np.int64), np.asarray(class_probs, np.float64)
        if ids.shape != probs.shape or ids.ndim != 2:
            raise ValueError("class ids and probabilities must be two arrays of hits × k")
        out = np.zeros(ids.shape[0])
        shifted = ids + 1  # -1 (no class) → 0, which no noun's mask holds
        for noun in named:
            wanted = np.take(self._mask(noun), shifted, mode="clip")
            out = np.maximum(out, (wanted * probs) @ np.ones(probs.shape[1]))
        return np.clip(out, 0.0, 1.0)

    def _mask(self, noun: str) -> np.ndarray:
        """Whether each class id + 1 is ``noun``'s (entry 0 and the last: never)."""
        masks = self.__dict__.setdefault("_masks", {})
        if noun not in masks:
            if "_width" not in self.__dict__:  # the largest class id + 3, read once
                top = max((max(c) for c in self.classes.values() if c), default=0)
                self.__dict__["_width"] = top + 3
            mask = np.zeros(self.__dict__["_width"], bool)
            mask[np.fromiter(self.classes[noun], np.int64) + 1] = True
            masks[noun] = mask
        return masks[noun]


_SHIPPED: list[NounClasses] = []


def shipped() -> NounClasses:
    """The shipped table, loaded once per process."""
    if not _SHIPPED:
        _SHIPPED.append(NounClasses.load())
    return _SHIPPED[0]
