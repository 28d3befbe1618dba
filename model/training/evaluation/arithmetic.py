"""Embedding arithmetic, measured: does ``photo − "A" + "B"`` find photos of B?

For a pair A → B, every photo whose captions mention A and not B is a start photo, and
four queries rank the other photos: ``arithmetic``, ``text`` ("B"), ``photo`` and
``plus_only`` (``photo + "B"``), each scored by the share of its top ``k`` whose captions
mention B (and A), with ``overlap_with_text`` and ``likeness`` (CNN-feature cosine × 100).
Per-start shares give bootstrap intervals (``stratified_interval``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from groundsearch.model.runtime.arithmetic import arithmetic_query, centre_rerank
from groundsearch.model.runtime.parsing.tree import DependencyTree

#: The pairs measured by default: people, scenes, colours and actions, each direction
#: chosen so that B is mentioned in at least MIN_B_PHOTOS and A-not-B in at least
#: MIN_STARTS Flickr8k test photos ("cat", in 2 test photos, and "horse", in 6, fail).
#: ``word/lemma`` types ``word`` in the query and matches ``word`` or ``lemma``.
DEFAULT_PAIRS = (
    "dog>man,man>woman,woman>man,boy>girl,girl>boy,"
    "beach>snow,snow>beach,grass>snow,street>beach,water>grass,"
    "red>blue,blue>red,black>white,white>black,yellow>red,"
    "running/run>sitting/sit,sitting/sit>running/run,walking/walk>running/run,"
    "jumping/jump>sitting/sit,riding/ride>walking/walk"
)
MIN_STARTS = 20
MIN_B_PHOTOS = 25
QUERIES = ("arithmetic", "text", "photo", "plus_only")
METRIC = {"b": "share_b", "a": "share_a", "likeness": "likeness"}

RESAMPLES = 1000

#: Texts → unit joint-space vectors, in order (the model's sentence encoder).
EmbedTexts = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Concept:
    """What a query types (``text``) and what a caption must contain to mention it."""

    text: str
    lemma: str

    @classmethod
    def parse(cls, spec: str) -> Concept:
        """``"dog"`` or ``"running/run"`` (query word / lemma matched in captions)."""
        text, _, lemma = spec.strip().partition("/")
        text, lemma = text.strip().lower(), (lemma.strip() or text.strip()).lower()
        if not text or not all(part.isalpha() for part in (*text.split(), lemma)):
            raise ValueError(f"bad concept {spec!r}: write a word, or word/lemma (running/run)")
        return cls(text, lemma)

    @property
    def forms(self) -> frozenset[str]:
        return frozenset({self.text, self.lemma})


@dataclass(frozen=True)
class Pair:
    """A → B: start from photos of A, take A away, add B."""

    a: Concept
    b: Concept

    @property
    def label(self) -> str:
        return f"{self.a.text}→{self.b.text}"


def parse_pairs(spec: str) -> list[Pair]:
    """``"dog>man,red>blue"`` → pairs (ValueError naming the bad item)."""
    pairs = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        a, sep, b = item.partition(">")
        if not sep or ">" in b:
            raise ValueError(f"bad pair {item!r}: write A>B, e.g. dog>man")
        pair = Pair(Concept.parse(a), Concept.parse(b))
        if pair.a.forms & pair.b.forms:
            raise ValueError(f"bad pair {item!r}: A and B are the same word")
        pairs.append(pair)
    if not pairs:
        raise ValueError("no pairs given: write A>B[,C>D…], e.g. dog>man,red>blue")
    return pairs


def photo_words(
    trees: Sequence[DependencyTree], caption_image: np.ndarray, n_images: int
) -> list[frozenset[str]]:
    """For each photo, the lower-cased words and lemmas of all its captions."""
    words: list[set[str]] = [set() for _ in range(n_images)]
    for tree, image in zip(trees, caption_image, strict=True):
        for node in tree:
            words[int(image)].update((node.text.lower(), node.lemma.lower()))
    return [frozenset(w) for w in words]


def mentions(words: Sequence[frozenset[str]], concept: Concept) -> np.ndarray:
    """Boolean mask over the photos: does any caption mention ``concept``?"""
    forms = concept.forms
    return np.array([bool(forms & w) for w in words], dtype=bool)


def top_k(
    query: np.ndarray, images: np.ndarray, k: int, exclude: int, rerank: bool = False
) -> np.ndarray:
    """The ``k`` photos (rows of ``images``) nearest ``query`` but ``exclude``; with
    ``rerank``, as the service's ``rerank=true`` re-sorts them."""
    scores = images @ query
    scores[exclude] = -np.inf
    fetch = min(k + (max(4 * k, 50) if rerank else 0), len(images) - 1)
    order = np.argsort(-scores, kind="stable")[:fetch]
    if rerank and len(order):
        new, _ = centre_rerank(images[order], 5)
        order = order[new]
    return order[:k]


def score_pair(
    pair: Pair,
    images: np.ndarray,
    words: Sequence[frozenset[str]],
    vec_a: np.ndarray,
    vec_b: np.ndarray,
    k: int = 5,
    rerank: bool = False,
    examples: int = 0,
    names: Sequence[str] | None = None,
    features: np.ndarray | None = None,
    channel_columns: int = 0,
) -> dict[str, Any]:
    """The four queries' shares of B (and of A) in the top ``k``, averaged over the
    start photos of ``pair``; ``examples`` start photos listed with their results."""
    has_a, has_b = mentions(words, pair.a), mentions(words, pair.b)
    starts = np.flatnonzero(has_a & ~has_b)
    out: dict[str, Any] = {
        "pair": pair.label,
        "a": pair.a.text,
        "b": pair.b.text,
        "starts": len(starts),
        "photos_with_a": int(has_a.sum()),
        "photos_with_b": int(has_b.sum()),
    }
    if len(starts) == 0:
        return out
    kinds = ("b", "a", "likeness") if features is not None else ("b", "a")
    shares: dict[str, dict[str, list[float]]] = {q: {x: [] for x in kinds} for q in QUERIES}
    overlap, shown = [], []
    text_query = arithmetic_query(vec_b)
    for n, s in enumerate(starts.tolist()):
        queries = {
            "arithmetic": arithmetic_query(images[s], [vec_b], [vec_a], channel_columns),
            "text": text_query,
            "photo": arithmetic_query(images[s], channel_columns=channel_columns),
            "plus_only": arithmetic_query(images[s], [vec_b], channel_columns=channel_columns),
        }
        found = {q: top_k(vec, images, k, s, rerank) for q, vec in queries.items()}
        for q, hits in found.items():
            shares[q]["b"].append(100.0 * float(has_b[hits].mean()))
            shares[q]["a"].append(100.0 * float(has_a[hits].mean()))
            if features is not None:
                shares[q]["likeness"].append(100.0 * float((features[hits] @ features[s]).mean()))
        overlap.append(len(set(found["arithmetic"]) & set(found["text"])) / k)
        if n < examples:
            label = (lambda i: names[i]) if names is not None else int
            shown.append(
                {
                    "start": label(s),
                    **{q: [label(i) for i in h] for q, h in found.items()},
                    "has_b": {q: has_b[h].tolist() for q, h in found.items()},
                }
            )
    for q in QUERIES:
        out[q] = {METRIC[x]: float(np.mean(v)) for x, v in shares[q].items()}
    out["per_start"] = {q: [round(v, 1) for v in shares[q]["b"]] for q in QUERIES}
    out["overlap_with_text"] = 100.0 * float(np.mean(overlap))
    if shown:
        out["examples"] = shown
    return out


def evaluate_arithmetic(
    images: np.ndarray,
    trees: Sequence[DependencyTree],
    caption_image: np.ndarray,
    embed_texts: EmbedTexts,
    pairs: Sequence[Pair],
    k: int = 5,
    rerank: bool = False,
    min_starts: int = MIN_STARTS,
    min_b_photos: int = MIN_B_PHOTOS,
    examples: int = 0,
    names: Sequence[str] | None = None,
    features: np.ndarray | None = None,
    channel_columns: int = 0,
) -> dict[str, Any]:
    """Every pair scored (``score_pair``) on the photos' unit joint vectors ``images``;
    ``mean`` averages the pairs with ``min_starts`` start photos and ``min_b_photos``
    photos of B (the others ``skipped``)."""
    if k < 1 or k >= len(images):
        raise ValueError(f"k must be between 1 and {len(images) - 1} (photos − 1), got {k}")
    caption_image = np.asarray(caption_image)
    words = photo_words(trees, caption_image, len(images))
    if features is not None:
        features = np.asarray(features, dtype=np.float64)
        features = features / np.maximum(np.linalg.norm(features, axis=1, keepdims=True), 1e-12)
    concepts = sorted({c.text for p in pairs for c in (p.a, p.b)})
    vectors = dict(zip(concepts, embed_texts(concepts), strict=True))
    rows = []
    for pair in pairs:
        row = score_pair(
            pair, images, words, vectors[pair.a.text], vectors[pair.b.text],
            k, rerank, examples, names, features, channel_columns,
        )  # fmt: skip
        if row["starts"] < min_starts or row["photos_with_b"] < min_b_photos:
            row["skipped"] = (
                f"{row['starts']} start photos (need {min_starts}) and "
                f"{row['photos_with_b']} photos of {pair.b.text!r} (need {min_b_photos})"
            )
        rows.append(row)
    used = [r for r in rows if "skipped" not in r]
    mean: dict[str, Any] = {"pairs": len(used)}
    if used:
        for q in QUERIES:
            mean[q] = {x: float(np.mean([r[q][x] for r in used])) for x in used[0][q]}
        mean["overlap_with_text"] = float(np.mean([r["overlap_with_text"] for r in used]))
        mean["ci95"] = {
            q: stratified_interval([np.array(r["per_start"][q]) for r in used]) for q in QUERIES
        }
    if features is not None:  # the likeness of two photos drawn at random, for scale
        n = len(features)
        total = float((features.sum(axis=0) @ features.sum(axis=0)) - n)  # off-diagonal
        mean["likeness_any_two"] = 100.0 * total / (n * (n - 1))
    return {
        "k": k,
        "rerank": rerank,
        "photos": len(images),
        "rule": {"min_starts": min_starts, "min_b_photos": min_b_photos},
        "mean": mean,
        "pairs": rows,
    }


def stratified_interval(
    groups: Sequence[np.ndarray], resamples: int = RESAMPLES, seed: int = 0, level: float = 0.95
) -> list[float]:
    """Percentile bootstrap interval of the mean over ``groups`` of each group's mean,
    resampling the values within each group (the start photos within each pair)."""
    if not groups or any(len(g) == 0 for g in groups):
        raise ValueError("every group needs at least one value")
    rng = np.random.default_rng(seed)
    means = np.column_stack(
        [np.asarray(g, dtype=np.float64)[rng.integers(0, len(g), (resamples, len(g)))].mean(1)
         for g in groups]
    )  # fmt: skip
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means.mean(axis=1), [tail, 100 - tail])
    return [float(low), float(high)]
