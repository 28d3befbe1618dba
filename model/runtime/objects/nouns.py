"""The detector's evidence for a query's nouns: noun → COCO kinds, and a photo's best.

``noun_objects.tsv`` (made by hand from COCO's 80 category names, each non-obvious
choice with its reason) names the kinds of the everyday nouns people type ("pony": horse,
"sofa": couch).

    table = NounObjects.load()
    evidence = table.evidence(table.named(words), scores)    # photos × 80 → photos
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from groundsearch.model.runtime.evidence import NounWords, default_path
from groundsearch.model.runtime.objects.detector import COCO

FILE_NAME = "noun_objects.tsv"
COLUMNS = ("noun", "objects")


@dataclass(frozen=True)
class NounObjects:
    """Noun → the COCO kinds (indices of ``COCO``) that are that thing."""

    kinds: Mapping[str, tuple[int, ...]]

    @classmethod
    def load(cls, path: Path | None = None) -> NounObjects:
        """The table at ``path`` (default: the shipped one); ValueError naming a bad row."""
        path = Path(path) if path is not None else default_path(FILE_NAME)
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader((ln for ln in f if not ln.startswith("#")), delimiter="\t"))
        if not rows or tuple(rows[0])[: len(COLUMNS)] != COLUMNS:
            raise ValueError(f"{path}: expected the columns {COLUMNS} first")
        table: dict[str, tuple[int, ...]] = {}
        for r in rows:
            noun, names = r["noun"], (r["objects"] or "").split()
            if not noun.isalpha() or noun != noun.lower() or not names:
                raise ValueError(f"{path}: a row is a lower-case word and COCO kinds: {noun!r}")
            if unknown := [k for k in names if k not in COCO]:
                raise ValueError(f"{path}: {noun!r} names kinds COCO lacks: {unknown}")
            table[noun] = tuple(COCO.index(k) for k in names)
        return cls(table)

    def nameable(self, words: Iterable[str]) -> list[str]:
        """The words (lower-cased) that have kinds, in order, each once."""
        return list(dict.fromkeys(w for w in (w.lower() for w in words) if w in self.kinds))

    def named(self, words: NounWords) -> list[str]:
        """A query's noun words with kinds: each lemma, else its written form."""
        return self.nameable(
            lemma if lemma in self.kinds or text not in self.kinds else text
            for lemma, text in words
        )

    def evidence(self, nouns: Sequence[str], scores: np.ndarray) -> np.ndarray | None:
        """Each photo's best score over ``nouns``' kinds, from its 80 scores (photos × 80;
        a row of NaN: not detected, stays NaN); None when no noun has kinds."""
        kinds = sorted({k for n in self.nameable(nouns) for k in self.kinds[n]})
        if not kinds:
            return None
        s = np.asarray(scores, np.float64)
        if s.ndim != 2 or s.shape[1] != len(COCO):
            raise ValueError(f"detector scores are photos × {len(COCO)}")
        return s[:, kinds].max(axis=1)
