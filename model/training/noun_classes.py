"""Make the noun → ImageNet classes table the relevance model's evidence reads.

A noun gets class ``c`` when it is ``c``'s **entry-level word**, or a one-word lemma of
``c``'s synset or a **hypernym** ("canoe" → "boat") that is the noun's **first sense** and
not **too general** (at most ``MAX_SPAN`` classes, not in ``TOO_GENERAL``).

WordNet 3.0 is read from Debian's ``wordnet-base``; only this command needs it.
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

#: Synsets under the span limit that are still too general: categories of use or form a
#: query rarely means as one visible kind of thing (each lemma of them is dropped as a
#: hypernym; a class still keeps its own and entry-level words).
TOO_GENERAL: dict[str, str] = {
    "entity": "the root",
    "object": "half of the classes (the span rule drops it too)",
    "whole": "half of the classes (the span rule drops it too)",
    "artifact": "every made thing (the span rule drops it too)",
    "artefact": "every made thing (the span rule drops it too)",
    "instrumentality": "most made things (the span rule drops it too)",
    "instrumentation": "most made things (the span rule drops it too)",
    "animal": "a third of the classes (the span rule drops it too)",
    "beast": "a third of the classes (the span rule drops it too)",
    "brute": "a third of the classes (the span rule drops it too)",
    "creature": "a third of the classes (the span rule drops it too)",
    "mammalian": "a zoological grade the classifier's classes cover unevenly",
    "device": "any instrumentality made for a purpose: from a ski to a lock",
    "container": "bags, bottles, cars (a car holds people) and barrows alike",
    "covering": "clothes, roofs and shields alike",
    "structure": "buildings, bridges, fences and fountains alike",
    "construction": "buildings, bridges, fences and fountains alike",
    "equipment": "sports gear to electronics",
    "implement": "tools to utensils",
    "instrument": "tools to utensils (the musical instrument is 'instrument' too)",
    "commodity": "a trade category, not a kind of thing",
    "good": "a trade category, not a kind of thing",
    "article": "a catch-all",
    "material": "a catch-all",
    "matter": "a catch-all",
    "substance": "a catch-all",
    "solid": "a catch-all",
    "mixture": "a catch-all",
    "part": "a catch-all",
    "portion": "a catch-all",
    "piece": "a catch-all",
    "unit": "a catch-all",
    "thing": "a catch-all",
    "system": "a catch-all",
    "creation": "a catch-all for made things",
    "product": "a catch-all for made things",
    "merchandise": "a trade category, not a kind of thing",
    "ware": "a trade category, not a kind of thing",
    "furnishing": "furniture to fittings",
    "conveyance": "anything that carries: vehicles to stretchers",
    "transport": "anything that carries: vehicles to stretchers",
    "protection": "a use, not a kind of thing",
    "support": "a use, not a kind of thing",
    "opening": "doors, windows and holes alike",
    "area": "a catch-all",
    "way": "a catch-all",
    "organism": "a catch-all for living things",
    "being": "a catch-all for living things",
    "plant": "flowers, trees, fungi and vegetables alike (few plant classes)",
    "food": "dishes, fruit and vegetables alike: people say what they see",
    "nutriment": "a catch-all for food",
    "produce": "a trade category, not a kind of thing",
    "vertebrate": "a zoological grade people do not search for",
    "craniate": "a zoological grade people do not search for",
    "chordate": "a zoological grade people do not search for",
    "invertebrate": "a zoological grade people do not search for",
    "placental": "a zoological grade people do not search for",
    "eutherian": "a zoological grade people do not search for",
    "mammal": "a zoological grade the classifier's classes cover unevenly",
    "arthropod": "a zoological grade people do not search for",
    "diapsid": "a zoological grade people do not search for",
    "young": "offspring: cubs of a few species",
    "offspring": "offspring: cubs of a few species",
    "male": "sex: bulls and stallions, not men",
    "female": "sex: hens and cows, not women",
    "parasite": "a way of life, not a kind of thing",
    "ectoparasite": "a way of life, not a kind of thing",
    "worker": "a way of life, not a kind of thing",
    "expert": "a way of life, not a kind of thing",
    "adult": "people: the classifier's three person classes cover no adult",
    "person": "people: the classifier's three person classes cover no person",
    "individual": "people: the classifier's three person classes cover no person",
    "someone": "people: the classifier's three person classes cover no person",
    "somebody": "people: the classifier's three person classes cover no person",
    "mortal": "people: the classifier's three person classes cover no person",
    "soul": "people: the classifier's three person classes cover no person",
    "man": "people: a groom is a man, but few men are grooms",
    "contestant": "people: the classifier's three person classes cover no person",
    "participant": "people: the classifier's three person classes cover no person",
    "associate": "people: the classifier's three person classes cover no person",
    "peer": "people: the classifier's three person classes cover no person",
    "equal": "people: the classifier's three person classes cover no person",
    "compeer": "people: the classifier's three person classes cover no person",
    "athlete": "people: the classifier's three person classes cover no person",
    "jock": "people: the classifier's three person classes cover no person",
    "sportsman": "people: the classifier's three person classes cover no person",
    "sportswoman": "people: the classifier's three person classes cover no person",
    "swimmer": "people: the classifier's three person classes cover no person",
    "adventurer": "people: the classifier's three person classes cover no person",
    "explorer": "people: the classifier's three person classes cover no person",
    "formation": "rocks, cliffs, shores and valleys alike",
    "geological": "rocks, cliffs, shores and valleys alike",
    "land": "a catch-all for ground",
    "ground": "a catch-all for ground",
    "location": "a catch-all for places",
    "region": "a catch-all for places",
    "point": "a catch-all",
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


def _read_index(path: Path) -> tuple[dict[str, tuple[str, ...]]]:
    senses: dict[str, tuple[str, ...]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith(" "):
            continue  # the licence header
        parts = line.split()
        count = int(parts[2])
        senses[parts[0].lower()] = tuple(parts[-count:])
    return (senses,)


def _read_data(path: Path) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    lemmas: dict[str, tuple[str, ...]] = {}
    hypernyms: dict[str, tuple[str, ...]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith(" "):
            continue
        head = line.split("|", 1)[0].split()
        offset, words = head[0], int(head[3], 16)
        lemmas[offset] = tuple(head[4 + 2 * i].lower() for i in range(words))
        p = 4 + 2 * words
        pointers = int(head[p])
        ups = []
        for i in range(pointers):
            symbol, target, pos = head[p + 1 + 4 * i : p + 4 + 4 * i]
            if symbol in ("@", "@i") and pos == "n":
                ups.append(target)
        hypernyms[offset] = tuple(ups)
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
        "# Made by `python -m groundsearch.model.training.noun_classes` from the entry-level\n"
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
