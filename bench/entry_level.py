"""Propose the entry-level word of each ImageNet class, and keep the reviewed choices.

The classifier names synsets ("notebook, notebook computer"); people say "laptop" (the
*entry-level* category, Ordonez et al. 2013). A word is proposed from the class's synset
(METEOR 1.5's WordNet): a **family** word (``FAMILIES``), else the commonest lemma by
**GloVe rank**, or a multi-word name's head noun; reviewed rows are kept.

    python bench/entry_level.py         # writes model/artifacts/entry_level.tsv
"""

from __future__ import annotations

import argparse
import csv
import io
import zipfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path

#: Synset offset → the word a class under it is called by (the nearest family
#: among the class's hypernyms wins).
FAMILIES: dict[str, str] = {
    "02084071": "dog",  # dog, domestic dog
    "01503061": "bird",
    "01726692": "snake",  # snake, serpent, ophidian
    "02484322": "monkey",  # monkey (old and new world)
    "02470325": "ape",  # great ape
    "01662784": "turtle",  # turtle
    "01674464": "lizard",  # lizard
    "01639765": "frog",  # frog, toad
    "01772222": "spider",  # spider
    "02274259": "butterfly",  # butterfly
    "02164464": "beetle",  # beetle
    "01629276": "salamander",  # salamander
    "02121808": "cat",  # domestic cat
    "02512053": "fish",  # fish
    "01976957": "crab",  # crab
    "02206856": "bee",  # bee
    "02219486": "ant",  # ant
    "12992868": "mushroom",  # fungus: mushrooms
    "02958343": "car",  # car, auto, automobile
}

#: GloVe rank from which a word counts as rare (people seldom say it).
RARE_RANK = 25_000

ROOT = "00001740"  # entity
HEADER = ("index", "class", "wnid", "word", "source", "reason")


def _pairs(text: str, sorted_part: bool = False) -> dict[str, list[str]]:
    """``key\\nvalues\\n`` pairs; with ``sorted_part`` only the first run of increasing
    keys (the nouns' synsets, before the verbs')."""
    lines = text.split("\n")
    out: dict[str, list[str]] = {}
    last = ""
    for i in range(0, len(lines) - 1, 2):
        if sorted_part and lines[i] < last:
            break
        last = lines[i]
        out[last] = lines[i + 1].split()
    return out


@dataclass
class WordNet:
    """WordNet 3.0 as METEOR ships it: lemma → synsets, synset → related synsets."""

    synsets: dict[str, list[str]]
    relations: dict[str, list[str]]

    @classmethod
    def from_meteor(cls) -> WordNet:
        import pycocoevalcap.meteor.meteor as meteor

        jar = Path(meteor.__file__).parent / "meteor-1.5.jar"
        with zipfile.ZipFile(jar) as z:
            synsets = _pairs(z.read("synonym/english.synsets").decode("utf-8"))
            relations = _pairs(z.read("synonym/english.relations").decode("utf-8"), True)
        return cls(synsets, relations)

    def __post_init__(self) -> None:
        self.lemmas: dict[str, list[str]] = {}  # noun synsets only
        for word, offsets in self.synsets.items():
            for o in offsets:
                if o in self.relations:
                    self.lemmas.setdefault(o, []).append(word)
        # the relations join each synset to its hypernyms and hyponyms alike: the
        # hypernyms are the neighbours one step nearer the root
        self.depth = {ROOT: 0}
        queue = deque([ROOT])
        while queue:
            s = queue.popleft()
            for t in self.relations.get(s, []):
                if t not in self.depth:
                    self.depth[t] = self.depth[s] + 1
                    queue.append(t)

    def parents(self, synset: str) -> list[str]:
        d = self.depth.get(synset)
        if d is None:
            return []
        return [t for t in self.relations.get(synset, []) if self.depth.get(t) == d - 1]

    def ancestors(self, synset: str) -> list[str]:
        """Hypernyms, nearest first (breadth first; each once)."""
        out: list[str] = []
        queue = deque(self.parents(synset))
        while queue:
            s = queue.popleft()
            if s not in out:
                out.append(s)
                queue.extend(self.parents(s))
        return out


def lemma_key(name: str) -> str:
    return name.lower().replace(" ", "_")


def recover_synsets(classes: list[str], wn: WordNet) -> list[str | None]:
    """Each class's synset offset: the longest chain of candidates whose offsets increase
    with the class index (ImageNet's wnid order); None where no synset fits."""
    options = [
        sorted(o for o in set(wn.synsets.get(lemma_key(c), [])) if o in wn.relations)
        for c in classes
    ]
    # longest strictly increasing chain, one option per class at most (DP over
    # (class, option): best chain ending there, and the link back)
    best: dict[tuple[int, str], tuple[int, tuple[int, str] | None]] = {}
    ends: list[tuple[str, int, tuple[int, str]]] = []  # (offset, length, node)
    for i, opts in enumerate(options):
        for o in opts:
            prev = max(((length, node) for off, length, node in ends if off < o), default=(0, None))
            best[(i, o)] = (prev[0] + 1, prev[1])
        ends += [(o, best[(i, o)][0], (i, o)) for o in opts]
    node = max(best, key=lambda n: (best[n][0], -n[0]), default=None)
    out: list[str | None] = [None] * len(classes)
    while node is not None:
        out[node[0]] = node[1]
        node = best[node][1]
    return out


def propose(
    classes: list[str], wn: WordNet, rank: dict[str, int]
) -> list[tuple[str, str, str, str]]:
    """(wnid, word, source, reason) for each class, before review."""
    synsets = recover_synsets(classes, wn)
    rows = []
    for name, synset in zip(classes, synsets, strict=True):
        head = name.lower().split()[-1]
        if synset is None:
            word = head if head in rank else ""
            rows.append(("", word, "name", "no WordNet synset: the name's last word"))
            continue
        wnid = f"n{synset}"
        ancestors = wn.ancestors(synset)
        family = next((FAMILIES[a] for a in ancestors if a in FAMILIES), None)
        if synset in FAMILIES:
            family = FAMILIES[synset]
        if family:
            rows.append((wnid, family, "family", f"a kind of {family}"))
            continue
        own = [w for w in wn.lemmas.get(synset, []) if w in rank]
        near = [a for a in ancestors if wn.depth.get(a, 0) >= wn.depth[synset] - 3]
        near_words = {w for a in near for w in wn.lemmas.get(a, [])}
        if " " in name and head in rank and head in near_words:
            rows.append((wnid, head, "head", f"an ancestor is called {head!r}"))
            continue
        word = min(own, key=rank.__getitem__, default="")
        if not word or rank[word] >= RARE_RANK:
            for parent in near[:2]:
                up = [w for w in wn.lemmas.get(parent, []) if w in rank]
                candidate = min(up, key=rank.__getitem__, default="")
                if candidate and rank[candidate] < RARE_RANK:
                    rows.append((wnid, candidate, "parent", f"{word or name!r} is rare"))
                    break
            else:
                rows.append((wnid, word, "name", _synonyms(word, own)))
            continue
        rows.append((wnid, word, "name", _synonyms(word, own)))
    return rows


def _synonyms(word: str, own: list[str]) -> str:
    """Why a class is called ``word``: the WordNet names it was the most frequent of."""
    return f"the most frequent of its names ({', '.join(own)})" if len(own) > 1 else ""


def read_reviewed(path: Path) -> dict[int, tuple[str, str]]:
    """The reviewed rows of an existing file: class index → (word, reason)."""
    if not path.exists():
        return {}
    with path.open(newline="") as f:
        rows = csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t")
        return {int(r["index"]): (r["word"], r["reason"]) for r in rows if r["source"] == "review"}


def write(path: Path, classes: list[str], proposed: list[tuple[str, str, str, str]]) -> int:
    """Write the table (reviewed rows kept); the number of reviewed rows."""
    reviewed = read_reviewed(path)
    out = io.StringIO()
    out.write(
        "# ImageNet class → the everyday noun people say (empty: never named). Made by\n"
        "# `python bench/entry_level.py`; rows whose source is\n"
        "# `review` are hand-checked choices the script keeps.\n"
    )
    w = csv.writer(out, delimiter="\t", lineterminator="\n")
    w.writerow(HEADER)
    for i, (name, (wnid, word, source, reason)) in enumerate(zip(classes, proposed, strict=True)):
        if i in reviewed:
            word, reason = reviewed[i]
            source = "review"
        w.writerow((i, name, wnid, word, source, reason))
    path.write_text(out.getvalue())
    return len(reviewed)


def main() -> None:
    from groundsearch.model.runtime.captioning.entry_level import default_path
    from groundsearch.model.runtime.concepts import imagenet_classes
    from groundsearch.model.runtime.text.glove import load_glove

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=default_path())
    args = ap.parse_args()
    classes = imagenet_classes()
    words, _ = load_glove()
    rank = {w: i for i, w in enumerate(words)}
    proposed = propose(classes, WordNet.from_meteor(), rank)
    kept = write(args.out, classes, proposed)
    named = sum(1 for p in proposed if p[1])
    print(f"wrote {args.out}: {len(classes)} classes, {named} proposed words, {kept} reviewed")


if __name__ == "__main__":
    main()
