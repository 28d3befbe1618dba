"""Short queries as rankings: a word or two, as people search a photo library.

Every everyday word present in a split is asked as ``word`` ("dog"), ``a word`` ("a
dog"; mass nouns bare) and ``phrase`` (its two commonest modifiers and its commonest
place in the split's caption trees: "black dog", "dog on grass"). A photo is relevant
when a caption's tree holds the word (or one of its ``everyday.KINDS``) as the head of its
phrase, and for a phrase the same structure. Reported per form: P@5, P@10 and average
precision, each beside its ceiling; labels are the captions', so precision is understated.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.training.evaluation.everyday import (
    BARE,
    PRESENT,
    article,
    everyday_queries,
    names,
)

#: The forms each word is asked in.
FORMS = ("word", "a word", "phrase")
#: Prepositions of a place phrase ("dog on grass").
PLACES = frozenset({"on", "in", "at", "near", "under", "by", "with"})
#: Modifier phrases and place phrases asked per word.
MODIFIERS, PLACES_PER_WORD = 2, 1
#: The cut-offs reported.
CUTOFFS = (5, 10)


@dataclass(frozen=True)
class ShortQuery:
    """A short query, the everyday word it is about, its form and its relevant photos."""

    text: str
    word: str
    form: str
    relevant: frozenset[int]


def short_queries(ds: object, trees: Sequence[DependencyTree]) -> list[ShortQuery]:
    """Every form of every everyday word present in a split (``ds``: CaptionedImages,
    ``trees``: its captions' trees, in order)."""
    images = list(ds.caption_image)  # type: ignore[attr-defined]
    showing = _nouns(trees, images)
    out: list[ShortQuery] = []
    concepts = [q.concept for q in everyday_queries()]
    shown = {c: frozenset().union(*(showing.get(w, ()) for w in names(c))) for c in concepts}
    present = {c: relevant for c, relevant in shown.items() if len(relevant) >= PRESENT}
    phrases = _phrases(trees, images, set(present))
    for word, relevant in present.items():
        out.append(ShortQuery(word, word, "word", relevant))
        if word not in BARE:
            out.append(ShortQuery(f"{article(word)} {word}", word, "a word", relevant))
        for text, photos in phrases.get(word, []):
            out.append(ShortQuery(text, word, "phrase", frozenset(photos)))
    return out


def _nouns(trees: Sequence[DependencyTree], images: Sequence[int]) -> dict[str, set[int]]:
    """Each noun heading its phrase (not a ``compound`` modifier: "orange shirt"), as its
    lemma and its written form in lower case → the photos whose caption trees hold it."""
    photos: dict[str, set[int]] = defaultdict(set)
    for tree, image in zip(trees, images, strict=True):
        for n in tree:
            if n.upos in ("NOUN", "PROPN") and n.deprel != "compound":
                photos[n.lemma.lower()].add(image)
                photos[n.text.lower()].add(image)
    return photos


def _phrases(
    trees: Sequence[DependencyTree], images: Sequence[int], words: set[str]
) -> dict[str, list[tuple[str, set[int]]]]:
    """Each word's modifier and place phrases with the photos whose captions hold them."""
    photos: dict[tuple[str, str], set[int]] = defaultdict(set)  # (word, text) → photos
    for tree, image in zip(trees, images, strict=True):
        for n in tree:
            word = n.lemma.lower()
            if word not in words or n.upos != "NOUN":
                continue
            for m in tree.children(n.index):
                if m.deprel in ("amod", "compound") and m.lemma.isalpha() and m.lemma != word:
                    photos[(word, f"{m.lemma.lower()} {word}")].add(image)
            for m in tree:
                if m.index == n.index or m.upos != "NOUN" or not m.lemma.isalpha():
                    continue
                if m.deprel.split(":")[0] not in ("obl", "nmod"):
                    continue
                if m.head not in (n.index, n.head) or m.lemma.lower() == word:
                    continue
                for c in tree.children(m.index):
                    if c.deprel == "case" and c.lemma.lower() in PLACES:
                        photos[(word, f"{word} {c.lemma.lower()} {m.lemma.lower()}")].add(image)
    out: dict[str, list[tuple[str, set[int]]]] = {}
    for word in sorted(words):
        counts = Counter({t: len(p) for (w, t), p in photos.items() if w == word})
        ranked = [t for t, c in counts.most_common() if c >= PRESENT]
        mods = [t for t in ranked if len(t.split()) == 2][:MODIFIERS]
        places = [t for t in ranked if len(t.split()) == 3][:PLACES_PER_WORD]
        out[word] = [(t, photos[(word, t)]) for t in mods + places]
    return out


def ranking_figures(scores: np.ndarray, relevant: frozenset[int]) -> dict[str, float]:
    """P@5, P@10 and average precision of one query's scores over the split's photos,
    with their ceilings (ties broken by photo order)."""
    order = np.lexsort((np.arange(scores.size), -np.asarray(scores, np.float64)))
    hit = np.isin(order, np.fromiter(relevant, np.int64, len(relevant)))
    n = len(relevant)
    out: dict[str, float] = {}
    for k in CUTOFFS:
        out[f"p@{k}"] = float(hit[:k].mean())
        out[f"p@{k}_ceiling"] = min(k, n) / k
    ranks = np.flatnonzero(hit) + 1
    out["ap"] = float((np.arange(1, ranks.size + 1) / ranks).mean()) if n else 0.0
    return out


def table(
    queries: Sequence[ShortQuery], rows: Callable[[int], np.ndarray]
) -> dict[str, dict[str, float]]:
    """Per form (and ``all``): queries, mean P@5, P@10, AP and the P@k ceilings, from
    ``rows(i)``: query i's scores of every photo."""
    per: dict[str, list[dict[str, float]]] = defaultdict(list)
    for i, q in enumerate(queries):
        figures = ranking_figures(rows(i), q.relevant)
        per[q.form].append(figures)
        per["all"].append(figures)
    return {
        form: {"queries": len(per[form])}
        | {key: float(np.mean([f[key] for f in per[form]])) for key in per[form][0]}
        for form in (*FORMS, "all")
        if per[form]
    }
