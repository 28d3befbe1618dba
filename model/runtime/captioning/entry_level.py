"""The everyday noun people say for each ImageNet class (the *entry-level* word):
``model/artifacts/entry_level.tsv`` maps each class to one word ("dog" for every breed)
or to none (made by ``python bench/entry_level.py``)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

FILE_NAME = "entry_level.tsv"
COLUMNS = ("index", "class", "wnid", "word", "source", "reason")


def default_path() -> Path:
    """The shipped table (``model/artifacts/entry_level.tsv``)."""
    return Path(__file__).resolve().parents[2] / "artifacts" / FILE_NAME


@dataclass(frozen=True)
class EntryLevel:
    """Class index → its class name and its entry-level word (``""``: never named)."""

    classes: tuple[str, ...]
    words: tuple[str, ...]
    reasons: tuple[str, ...]
    #: each class's WordNet id ("n02123045"; "" where none was found)
    wnids: tuple[str, ...] = ()

    @classmethod
    def load(cls, path: Path | None = None) -> EntryLevel:
        """The table at ``path`` (default: the shipped one); ValueError if malformed."""
        path = Path(path) if path is not None else default_path()
        with path.open(newline="", encoding="utf-8") as f:
            lines = (line for line in f if not line.startswith("#"))
            rows = list(csv.DictReader(lines, delimiter="\t"))
        if not rows or tuple(rows[0]) != COLUMNS:
            raise ValueError(f"{path}: expected the columns {COLUMNS}")
        if [int(r["index"]) for r in rows] != list(range(len(rows))):
            raise ValueError(f"{path}: rows must be the classes 0, 1, 2, … in order")
        bad = [r["word"] for r in rows if r["word"] and not r["word"].isalpha()]
        if bad:
            raise ValueError(f"{path}: a word is one lower-case word, got {bad[:3]}")
        return cls(
            tuple(r["class"] for r in rows),
            tuple(r["word"].lower() for r in rows),
            tuple(r["reason"] for r in rows),
            tuple(r["wnid"] for r in rows),
        )

    def __len__(self) -> int:
        return len(self.classes)

    def word(self, index: int) -> str:
        """The word for class ``index`` (``""``: never named)."""
        return self.words[index]

    @property
    def vocabulary(self) -> list[str]:
        """Every word some class is called by, each once, in class order."""
        return list(dict.fromkeys(w for w in self.words if w))
