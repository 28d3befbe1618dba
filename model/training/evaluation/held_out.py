"""The held-out-concept protocol: does search find what training never showed?

A model trained without the photos of ``HELD_OUT`` is asked for single concepts ("a
cat": P@5, R@10), short compositions ("a man riding a horse") and the split's captions
that mention a held-out concept; ``photo_best_words`` is the open-vocabulary check.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundsearch.model.data.flickr import CaptionedImages
from groundsearch.model.data.held_out_concepts import HELD_OUT, photos_mentioning, words_of
from groundsearch.model.runtime.parsing.tree import DependencyTree

ParseFn = Callable[[list[str]], list[DependencyTree]]

#: Words for the second part of a composition, with the forms that count as a mention.
_RIDE = ("riding", "rides", "ride", "rider")
_WATER = ("water", "lake", "river", "ocean", "sea", "pond")
_PEOPLE = ("people", "men", "man", "women", "woman", "person", "group", "boy", "girl")


@dataclass(frozen=True)
class ConceptQuery:
    """A text query, the held-out concept it is about, and what a relevant photo's
    caption must mention (one form of each group)."""

    text: str
    concept: str
    groups: tuple[tuple[str, ...], ...]


def single_queries(concepts: Mapping[str, Collection[str]]) -> list[ConceptQuery]:
    """ "a cat", "a horse", …; mass nouns without the article ("snow")."""
    return [
        ConceptQuery(name if name in {"snow"} else f"a {name}", name, (tuple(forms),))
        for name, forms in concepts.items()
    ]


def compositional_queries(concepts: Mapping[str, Collection[str]]) -> list[ConceptQuery]:
    """Two short compositions per ``HELD_OUT`` concept (others get none)."""
    extra: dict[str, list[tuple[str, tuple[str, ...]]]] = {
        "cat": [
            ("a cat sitting", ("sitting", "sits", "laying", "lying", "lays")),
            ("a cat and a person", _PEOPLE),
        ],
        "horse": [
            ("a man riding a horse", _RIDE),
            ("a horse running", ("running", "runs", "run", "gallops", "galloping")),
        ],
        "cow": [("a cow in a field", ("field", "grass", "pasture")), ("a man and a cow", _PEOPLE)],
        "bird": [
            ("a bird flying", ("flying", "flies", "fly", "flight", "wings")),
            ("a bird in the water", _WATER),
        ],
        "guitar": [
            ("a man playing the guitar", ("playing", "plays", "play")),
            ("a guitarist on stage", ("stage", "concert", "microphone", "band")),
        ],
        "bicycle": [
            ("a man riding a bicycle", _RIDE),
            ("a bicycle on a dirt road", ("dirt", "trail", "road", "path")),
        ],
        "boat": [("a boat on the water", _WATER), ("people in a boat", _PEOPLE)],
        "car": [("a red car", ("red",)), ("a car on the street", ("street", "road"))],
        "motorcycle": [
            ("a man riding a motorcycle", _RIDE),
            ("a motorcycle race", ("race", "racing", "track", "racer")),
        ],
        "snow": [
            ("a dog in the snow", ("dog", "dogs", "puppy")),
            ("a person skiing in the snow", ("skiing", "skier", "ski", "skis", "skiers")),
        ],
    }
    return [
        ConceptQuery(text, name, (tuple(forms), other))
        for name, forms in concepts.items()
        for text, other in extra.get(name, [])
    ]


def ranked_query_metrics(scores: np.ndarray, relevant: Sequence[set[int]]) -> list[dict[str, Any]]:
    """P@5 and R@10 (capped) of each query's row of ``scores`` (queries × photos)."""
    top = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    out = []
    for row, rel in zip(top, relevant, strict=True):
        out.append(
            {
                "relevant": len(rel),
                "p@5": 100.0 * sum(int(i) in rel for i in row[:5]) / 5,
                "r@10": 100.0 * sum(int(i) in rel for i in row) / min(len(rel), 10),
                "top5": [int(i) for i in row[:5]],
            }
        )
    return out


def caption_ranks(scores: np.ndarray, caption_image: np.ndarray) -> np.ndarray:
    """The rank (1 = first) of each caption's own photo among ``scores`` (captions × photos)."""
    own = scores[np.arange(len(scores)), caption_image]
    return 1 + (scores > own[:, None]).sum(axis=1)


def recall_at(ranks: np.ndarray) -> dict[str, float]:
    if len(ranks) == 0:
        return {"captions": 0}
    out: dict[str, float] = {"captions": len(ranks)}
    for k in (1, 5, 10):
        out[f"r@{k}"] = 100.0 * float(np.mean(ranks <= k))
    out["median_rank"] = float(np.median(ranks))
    return out


def held_out_metrics(
    embed_sentences: Callable[[Sequence[DependencyTree]], np.ndarray],
    photo_vectors: np.ndarray,
    ds: CaptionedImages,
    caption_trees: Sequence[DependencyTree],
    parse: ParseFn,
    concepts: Mapping[str, Collection[str]] = HELD_OUT,
    photo_penalty: np.ndarray | None = None,
) -> dict[str, Any]:
    """The protocol's figures for one model on one split; with ``photo_penalty`` text
    queries rank the photos as ``/search`` does."""
    result: dict[str, Any] = {"concepts": {k: list(v) for k, v in concepts.items()}}
    penalty = 0.0 if photo_penalty is None else np.asarray(photo_penalty)[None, :]
    for kind, queries in (
        ("single", single_queries(concepts)),
        ("compositional", compositional_queries(concepts)),
    ):
        relevant = [photos_mentioning(ds, *q.groups) for q in queries]
        used = [(q, r) for q, r in zip(queries, relevant, strict=True) if r]
        if not used:
            result[kind] = {"queries": []}
            continue
        y = embed_sentences(parse([q.text for q, _ in used]))
        rows = ranked_query_metrics(y @ photo_vectors.T - penalty, [r for _, r in used])
        per_query = [
            {"query": q.text, "concept": q.concept, **m}
            for (q, _), m in zip(used, rows, strict=True)
        ]
        result[kind] = {
            "p@5": float(np.mean([m["p@5"] for m in rows])),
            "r@10": float(np.mean([m["r@10"] for m in rows])),
            "queries": per_query,
            "left_out": [q.text for q, r in zip(queries, relevant, strict=True) if not r],
        }
    forms = {f for fs in concepts.values() for f in fs}
    mention = np.array([not words_of(c).isdisjoint(forms) for c in ds.captions])
    y = embed_sentences(caption_trees)
    ranks = caption_ranks(y @ photo_vectors.T - penalty, np.asarray(ds.caption_image))
    result["captions"] = {
        "held_out": recall_at(ranks[mention]),
        "others": recall_at(ranks[~mention]),
    }
    return result


#: ImageNet-style concept words for the open-vocabulary gallery check.
CONCEPT_WORDS: tuple[str, ...] = (
    "cat", "dog", "horse", "cow", "bird", "bear", "zebra", "giraffe", "elephant", "fish",
    "car", "bicycle", "motorcycle", "boat", "airplane", "train", "rocket", "astronaut",
    "clock", "camera", "coffee", "cup", "cake", "banana", "broccoli", "pizza", "donut",
    "toilet", "guitar", "ball", "coins", "bricks", "grass", "stones", "galaxy", "eye",
    "microscope", "paper", "flag", "snow",
)  # fmt: skip

#: What each shipped sample photo shows, as words of ``CONCEPT_WORDS`` (any counts).
SAMPLE_TRUTH: dict[str, tuple[str, ...]] = {
    "astronaut.png": ("astronaut", "flag"),
    "brick.png": ("bricks",),
    "camera.png": ("camera",),
    "chelsea.png": ("cat",),
    "clock_motion.png": ("clock",),
    "coffee.png": ("coffee", "cup"),
    "coins.png": ("coins",),
    "grass.png": ("grass",),
    "gravel.png": ("stones",),
    "horse.png": ("horse",),
    "hubble_deep_field.jpg": ("galaxy",),
    "ihc.png": ("microscope",),
    "retina.jpg": ("eye",),
    "rocket.jpg": ("rocket",),
    "text.png": ("paper",),
}


def photo_best_words(
    embed_sentences: Callable[[Sequence[DependencyTree]], np.ndarray],
    photo_vectors: np.ndarray,
    photos: Sequence[str],
    parse: ParseFn,
    words: Sequence[str] = CONCEPT_WORDS,
    truth: Mapping[str, Collection[str]] = SAMPLE_TRUTH,
) -> dict[str, Any]:
    """Each photo's three best queries among ``words`` and how many are right by
    ``truth``; and each truth word's best photo and how many are right."""
    texts = [w if w in {"snow", "grass", "coffee"} else f"a {w}" for w in words]
    scores = photo_vectors @ embed_sentences(parse(texts)).T
    rows = []
    for name, row in zip(photos, scores, strict=True):
        order = np.argsort(-row, kind="stable")[:3]
        best = [words[i] for i in order]
        rows.append({"photo": name, "best": best, "right": best[0] in truth.get(name, ())})
    judged = [r for r in rows if r["photo"] in truth]
    # the other direction (search): each truth word's best photo among the gallery's
    searches = []
    for w, col in zip(words, scores.T, strict=True):
        owners = [name for name in photos if w in truth.get(name, ())]
        if owners:
            found = photos[int(np.argmax(col))]
            searches.append({"word": w, "best_photo": found, "right": found in owners})
    return {
        "photos": rows,
        "top1_right": sum(r["right"] for r in judged),
        "judged": len(judged),
        "searches": searches,
        "search_right": sum(s["right"] for s in searches),
    }
