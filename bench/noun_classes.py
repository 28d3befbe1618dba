"""Make the noun → ImageNet classes table the relevance model's evidence reads.

A noun gets class ``c`` when it is ``c``'s **entry-level word**, or a one-word lemma of
``c``'s synset or a **hypernym** ("canoe" → "boat") that is the noun's **first sense** and
not **too general** (at most ``MAX_SPAN`` classes, not in ``TOO_GENERAL``).

WordNet 3.0 is read from Debian's ``wordnet-base``; only this command needs it.

    python bench/noun_classes.py        # writes model/artifacts/noun_classes.tsv
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: A hypernym that spans more classes than this is too general to be evidence ("dog",
#: 118 breeds, stays; "animal", "artifact", "organism" go).
MAX_SPAN = 130

#: Synsets under the span limit that are still too general, by why: categories of use or
#: form a query rarely means as one visible kind of thing (each lemma of them is dropped
#: as a hypernym; a class still keeps its own and entry-level words).
_TOO_GENERAL_WHY = {
    "the root": "entity",
    "half of the classes (the span rule drops it too)": "object whole",
    "every made thing (the span rule drops it too)": "artifact artefact",
    "most made things (the span rule drops it too)": "instrumentality instrumentation",
    "a third of the classes (the span rule drops it too)": "animal beast brute creature",
    "a zoological grade the classifier's classes cover unevenly": "mammalian mammal",
    "a zoological grade people do not search for": "vertebrate craniate chordate "
    "invertebrate placental eutherian arthropod diapsid",
    "any instrumentality made for a purpose: from a ski to a lock": "device",
    "bags, bottles, cars (a car holds people) and barrows alike": "container",
    "clothes, roofs and shields alike": "covering",
    "buildings, bridges, fences and fountains alike": "structure construction",
    "sports gear to electronics": "equipment",
    "tools to utensils (the musical instrument is 'instrument' too)": "implement instrument",
    "a trade category, not a kind of thing": "commodity good merchandise ware produce",
    "a catch-all": "article material matter substance solid mixture part portion piece unit "
    "thing system area way point",
    "a catch-all for made things": "creation product",
    "furniture to fittings": "furnishing",
    "anything that carries: vehicles to stretchers": "conveyance transport",
    "a use, not a kind of thing": "protection support",
    "doors, windows and holes alike": "opening",
    "a catch-all for living things": "organism being",
    "flowers, trees, fungi and vegetables alike (few plant classes)": "plant",
    "dishes, fruit and vegetables alike: people say what they see": "food",
    "a catch-all for food": "nutriment",
    "offspring: cubs of a few species": "young offspring",
    "sex: bulls and stallions, hens and cows, not men or women": "male female",
    "a way of life, not a kind of thing": "parasite ectoparasite worker expert",
    "people: the classifier's three person classes cover no person": "adult person "
    "individual someone somebody mortal soul contestant participant associate peer equal "
    "compeer athlete jock sportsman sportswoman swimmer adventurer explorer",
    "people: a groom is a man, but few men are grooms": "man",
    "rocks, cliffs, shores and valleys alike": "formation geological",
    "a catch-all for ground": "land ground",
    "a catch-all for places": "location region",
}
TOO_GENERAL: dict[str, str] = {
    word: why for why, words in _TOO_GENERAL_WHY.items() for word in words.split()
}


@dataclass(frozen=True)
class WordNetNouns:
    """WordNet 3.0's nouns: each lemma's synsets in sense order, each synset's lemmas
    and hypernyms (``@`` and instance ``@i`` pointers)."""

    senses: Mapping[str, tuple[str, ...]]
    lemmas: Mapping[str, tuple[str, ...]]
    hypernyms: Mapping[str, tuple[str, ...]]

    @classmethod
    def read(cls, folder: Path) -> WordNetNouns:
        """From a WordNet ``dict`` folder (``index.noun`` and ``data.noun``)."""
        folder = Path(folder)
        index, data = folder / "index.noun", folder / "data.noun"
        if not index.exists() or not data.exists():
            raise FileNotFoundError(
                f"no WordNet 3.0 in {folder} (index.noun, data.noun): apt-get install "
                "wordnet-base, or name its folder with --wordnet"
            )
        return cls(*_read_index(index), *_read_data(data))

    def ancestors(self, synset: str) -> list[str]:
        """Every hypernym of ``synset`` through every path, nearest first, each once."""
        out: list[str] = []
        frontier = list(self.hypernyms.get(synset, ()))
        while frontier:
            nxt: list[str] = []
            for s in frontier:
                if s not in out:
                    out.append(s)
                    nxt.extend(self.hypernyms.get(s, ()))
            frontier = nxt
        return out

    def first_sense(self, lemma: str) -> str | None:
        senses = self.senses.get(lemma)
        return senses[0] if senses else None


def _entries(path: Path) -> list[str]:
    """The lines of a WordNet file, less its licence header (indented lines)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith(" ")]


def _read_index(path: Path) -> tuple[dict[str, tuple[str, ...]]]:
    senses: dict[str, tuple[str, ...]] = {}
    for parts in map(str.split, _entries(path)):
        senses[parts[0].lower()] = tuple(parts[-int(parts[2]) :])
    return (senses,)


def _read_data(path: Path) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    lemmas: dict[str, tuple[str, ...]] = {}
    hypernyms: dict[str, tuple[str, ...]] = {}
    for line in _entries(path):
        head = line.split("|", 1)[0].split()
        offset, words = head[0], int(head[3], 16)
        lemmas[offset] = tuple(head[4 + 2 * i].lower() for i in range(words))
        p = 4 + 2 * words
        pointers = [head[p + 1 + 4 * i : p + 4 + 4 * i] for i in range(int(head[p]))]
        hypernyms[offset] = tuple(
            t for sym, t, pos in pointers if sym in ("@", "@i") and pos == "n"
        )
    return lemmas, hypernyms


def is_word(lemma: str) -> bool:
    """A lemma a one-word query can name: letters only ("sports_car", "t-shirt" cannot)."""
    return lemma.isalpha()


@dataclass(frozen=True)
class Row:
    """One noun of the table: its classes (indices, ascending) and why each is there."""

    noun: str
    classes: tuple[int, ...]
    how: str


def noun_classes(
    wnids: Sequence[str],
    words: Sequence[str],
    wn: WordNetNouns,
    max_span: int = MAX_SPAN,
    too_general: Iterable[str] = TOO_GENERAL,
) -> list[Row]:
    """The table (nouns in alphabetical order) for the classes whose WordNet ids
    (``n02123045``, "" where unknown) and entry-level words (``""``: none) are given."""
    stop = frozenset(too_general)
    span: dict[str, set[int]] = {}
    chains: list[list[str]] = []
    for c, wnid in enumerate(wnids):
        synset = wnid[1:] if wnid else ""
        chain = [synset, *wn.ancestors(synset)] if synset in wn.lemmas else []
        chains.append(chain)
        for s in chain:
            span.setdefault(s, set()).add(c)
    found: dict[str, dict[int, set[str]]] = {}
    for c, (chain, word) in enumerate(zip(chains, words, strict=True)):
        if word:
            found.setdefault(word, {}).setdefault(c, set()).add("entry")
        for s in chain:
            if len(span[s]) > max_span:
                continue
            for lemma in wn.lemmas.get(s, ()):
                if not is_word(lemma) or lemma in stop or wn.first_sense(lemma) != s:
                    continue
                found.setdefault(lemma, {}).setdefault(c, set()).add(
                    "name" if s == chain[0] else "hypernym"
                )
    rows = []
    for noun in sorted(found):
        by_class = found[noun]
        kinds = sorted({k for ks in by_class.values() for k in ks})
        counts = ", ".join(f"{k} {sum(k in ks for ks in by_class.values())}" for k in kinds)
        rows.append(Row(noun, tuple(sorted(by_class)), counts))
    return rows


HEADER = ("noun", "classes", "how", "names")


def write(path: Path, rows: Sequence[Row], classes: Sequence[str]) -> None:
    out = io.StringIO()
    out.write(
        "# noun → the ImageNet classes that are that thing (the relevance model's evidence).\n"
        "# Made by `python bench/noun_classes.py` from the entry-level\n"
        "# table and WordNet 3.0 (first senses, hypernyms up to the too-general ones); the\n"
        "# runtime reads the first two columns. how: where its classes come from (entry:\n"
        "# entry-level word, name: the class's own synset, hypernym: an ancestor's lemma).\n"
    )
    out.write("\t".join(HEADER) + "\n")
    for r in rows:
        names = "; ".join(classes[c] for c in r.classes[:8])
        more = f"; … ({len(r.classes)})" if len(r.classes) > 8 else ""
        out.write(f"{r.noun}\t{' '.join(map(str, r.classes))}\t{r.how}\t{names}{more}\n")
    from groundsearch.common.files import atomic_path

    with atomic_path(path) as tmp:
        Path(tmp).write_text(out.getvalue(), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    from groundsearch.model.runtime.captioning.entry_level import EntryLevel
    from groundsearch.model.runtime.captioning.entry_level import default_path as entry_path
    from groundsearch.model.runtime.evidence import default_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    ap.add_argument("--entry-level", type=Path, default=entry_path())
    ap.add_argument("--out", type=Path, default=default_path())
    args = ap.parse_args(argv)
    table = EntryLevel.load(args.entry_level)
    rows = noun_classes(list(table.wnids), list(table.words), WordNetNouns.read(args.wordnet))
    write(args.out, rows, table.classes)
    covered = len({c for r in rows for c in r.classes})
    print(f"wrote {args.out}: {len(rows)} nouns over {covered} classes")


if __name__ == "__main__":
    main()
