"""Choosing the short-query fusion (``model.runtime.fusion``) on the mixed dev.

Each dev collection's short queries (``evaluation.short_queries``) are embedded once with
each photo's evidence. For each query length n (content words), every triple of weights
of ``GRID`` is scored by the short queries of n words' average precision, averaged over
the collections, and the best kept; a length whose dev captions of n content words ("a
dog runs": 2), fused too, lose more than ``NOISE`` of text → image R@1 + R@5 + R@10
(summed over the collections) against the joint scores is not fused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

from groundsearch.model.data import DatasetError
from groundsearch.model.runtime.evidence import noun_words
from groundsearch.model.runtime.fusion import CHANNELS, Fusion, Weights, content_words
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.training.evaluation.everyday import PRESENT
from groundsearch.model.training.evaluation.short_queries import ShortQuery, short_queries, table
from groundsearch.model.training.relevance import EmbedFn, ParseFn, SplitData

#: The weights tried for each channel.
GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
#: The text → image recalls (R@K) of the dev captions' figure.
RECALLS = (1, 5, 10)
#: How far (recall points, summed) the captions' figure may fall for a length to be fused.
NOISE = 1.0


@dataclass(frozen=True)
class Rows:
    """Queries' joint scores of every photo, evidence channels (NaN: none) and content words."""

    joint: np.ndarray
    classes: np.ndarray
    tagger: np.ndarray
    objects: np.ndarray
    words: np.ndarray

    def fused(self, fusion: Fusion, i: int) -> np.ndarray:
        """Query i's scores as served with ``fusion``."""
        words = int(self.words[i])
        if not fusion.applies(words, 1):
            return self.joint[i]
        channels = (self.classes, self.tagger, self.objects)
        c, t, o = (None if np.isnan(x[i]).all() else x[i] for x in channels)
        return fusion.fuse(self.joint[i], c, t, words, o)


def evidence_rows(data: SplitData, trees: Sequence[DependencyTree], joint: np.ndarray) -> Rows:
    """The queries' channels over every photo of ``data`` (NaN rows: no evidence; the
    detector's where ``data`` holds its photos' scores)."""
    objects, kinds = data.objects, data.kinds
    classes, tagger, found = (np.full(joint.shape, np.nan) for _ in range(3))
    everyone = np.arange(len(data.ds.images))
    for i, tree in enumerate(trees):
        c, t = data.channels(data.query_nouns(tree), everyone)
        o = None
        if objects is not None and kinds is not None:
            o = kinds.evidence(kinds.named(noun_words(tree)), objects)
        for rows, values in ((classes, c), (tagger, t), (found, o)):
            if values is not None:
                rows[i] = values
    words = np.array([content_words(t) for t in trees])
    return Rows(joint, classes, tagger, found, words)


@dataclass(frozen=True)
class Collection:
    """One dev collection prepared: its short queries and its short captions (of at most
    ``longest`` content words, with evidence nouns), each with its evidence."""

    name: str
    queries: list[ShortQuery]
    rows: Rows
    #: every caption's own photo, and its rank by the joint score (0: first)
    own: np.ndarray
    caption_ranks: np.ndarray
    short_captions: np.ndarray
    caption_rows: Rows

    def lengths(self) -> set[int]:
        return {int(w) for w in self.rows.words}

    def short_table(
        self, fusion: Fusion | None, words: int | None = None
    ) -> dict[str, dict[str, float]]:
        """The short queries' (of ``words`` content words) figures, fused by ``fusion``."""
        keep = [i for i in range(len(self.queries)) if words in (None, self.rows.words[i])]
        queries = [self.queries[i] for i in keep]
        if fusion is None:
            return table(queries, lambda j: self.rows.joint[keep[j]])
        return table(queries, lambda j: self.rows.fused(fusion, keep[j]))

    def sentence_recall(self, fusion: Fusion | None) -> float:
        """Text → image R@1 + R@5 + R@10 (percent) of the captions, short ones fused."""
        ranks = self.caption_ranks.copy()
        if fusion is not None:
            for j, c in enumerate(self.short_captions):
                row = self.caption_rows.fused(fusion, j)
                ranks[c] = int((row > row[self.own[c]]).sum())
        return float(sum(100 * (ranks < k).mean() for k in RECALLS))


def prepare(name: str, data: SplitData, embed: EmbedFn, parse: ParseFn) -> Collection:
    """A dev collection's short queries and short captions with their evidence."""
    queries = short_queries(data.ds, data.trees)
    trees = parse([q.text for q in queries])
    joint = data.text_scores(embed(trees)) if trees else np.zeros((0, len(data.ds.images)))
    rows = evidence_rows(data, trees, joint)
    longest = int(rows.words.max(initial=0))
    scores = data.text_scores(data.captions)
    own = np.asarray(data.caption_image)
    caption_ranks = (scores > scores[np.arange(len(own)), own][:, None]).sum(axis=1)
    fits = [content_words(t) <= longest and bool(data.query_nouns(t)) for t in data.trees]
    short = np.flatnonzero(np.array(fits, bool)).astype(np.int64)
    short_trees = [data.trees[j] for j in short]
    caption_rows = evidence_rows(data, short_trees, scores[short])
    return Collection(name, queries, rows, own, caption_ranks, short, caption_rows)


def choose(
    collections: Sequence[Collection], identity: Mapping[str, str]
) -> tuple[Fusion, dict[str, Any]]:
    """The fusion chosen on ``collections`` and what was tried (DatasetError when they
    hold no short query: no everyday word in ``PRESENT`` photos' captions)."""
    lengths = sorted(set().union(*(c.lengths() for c in collections)) - {0})
    if not lengths:
        raise DatasetError(
            f"no everyday word is in {PRESENT} or more photos' captions of these splits: "
            "there is no short query to choose the fusion on"
        )
    off: Weights = (0.0, 0.0, 0.0)
    weights: list[Weights] = [off] * (max(lengths, default=0))
    trials: dict[int, list[dict[str, float]]] = {}
    detected = any(np.isfinite(c.rows.objects).any() for c in collections)
    for n in lengths:
        best: tuple[float, Weights] | None = None
        trials[n] = []
        for triple in product(GRID, GRID, GRID if detected else (0.0,)):
            fusion = Fusion(tuple((triple if m == n else off) for m in range(1, n + 1)))
            aps = [c.short_table(fusion, n)["all"]["ap"] for c in collections if n in c.lengths()]
            ap = float(np.mean(aps))
            trials[n].append({**dict(zip(CHANNELS, triple, strict=True)), "ap": round(ap, 4)})
            if best is None or ap > best[0] + 1e-9:
                best = (ap, triple)
        assert best is not None
        weights[n - 1] = best[1]
    joint = sum(c.sentence_recall(None) for c in collections)
    sentences = {"joint": round(joint, 2)}
    for n in lengths:  # a length whose captions lose beyond noise is not fused
        alone = Fusion(tuple(weights[m - 1] if m == n else off for m in range(1, n + 1)))
        recall = sum(c.sentence_recall(alone) for c in collections)
        sentences[f"{n} words"] = round(recall, 2)
        if recall < joint - NOISE:
            weights[n - 1] = off
    fusion = Fusion(tuple(weights), identity)

    def figures(f: Fusion | None) -> dict[str, Any]:
        return {
            c.name: {
                "short": c.short_table(f)["all"],
                "t2i_recall_sum": round(c.sentence_recall(f), 2),
            }
            for c in collections
        }

    return fusion, {
        "trials": trials,
        "captions_t2i_recall_sum": sentences,
        "joint_alone": figures(None),
        "fused": figures(fusion),
    }
