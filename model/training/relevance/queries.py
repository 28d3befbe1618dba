"""Every kind's queries asked on a split as the service answers them, their hits
pooled (``gather``): captions, similar photos, held-out concepts, arithmetic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from groundsearch.model.data.held_out_concepts import HELD_OUT, photos_mentioning, with_kinds
from groundsearch.model.runtime.arithmetic import arithmetic_query
from groundsearch.model.runtime.evidence import top_of
from groundsearch.model.runtime.relevance import (
    QUERY_KINDS,
    TOP,
    RelevanceModel,
    features,
    novelty_of,
    word_count,
)
from groundsearch.model.training.evaluation.arithmetic import (
    DEFAULT_PAIRS,
    mentions,
    parse_pairs,
    photo_words,
)
from groundsearch.model.training.evaluation.everyday import present_queries
from groundsearch.model.training.evaluation.held_out import (
    ConceptQuery,
    compositional_queries,
    single_queries,
)
from groundsearch.model.training.relevance.labels import caption_photo_relevant, consensus_nouns
from groundsearch.model.training.relevance.pools import Pool
from groundsearch.model.training.relevance.splits import EmbedFn, ParseFn, SplitData

#: Start photos per arithmetic pair (the first ones of the split).
MAX_STARTS = 25


@dataclass
class CaptionChecks:
    """Caption queries (captions → photos): top scores, words, novelty, the rank of the
    own photo (-1 below the top) and each one's hits' evidence (None: none)."""

    scores: np.ndarray
    words: np.ndarray
    novelty: np.ndarray
    own_rank: np.ndarray
    evidence: list[np.ndarray | None] = field(default_factory=list)

    @classmethod
    def joined(cls, parts: Sequence[CaptionChecks]) -> CaptionChecks:
        """Several collections' caption queries, one after another."""
        return cls(
            np.concatenate([c.scores for c in parts]),
            np.concatenate([c.words for c in parts]),
            np.concatenate([c.novelty for c in parts]),
            np.concatenate([c.own_rank for c in parts]),
            [e for c in parts for e in (c.evidence or [None] * len(c.own_rank))],
        )


def caption_pools(data: SplitData, pools: Mapping[str, Pool], top: int = TOP) -> CaptionChecks:
    """captions → photos and photos → captions; the caption queries' checks."""
    relevant = caption_photo_relevant(data)
    rows = zip(data.text_scores(data.captions), data.trees, strict=True)
    ranked = [data.ranked(row, tree, top) for row, tree in rows]
    idx, caption_scores = np.stack([i for i, _ in ranked]), np.stack([s for _, s in ranked])
    novelty = data.novelty(data.captions)
    words = np.array([word_count(c) for c in data.ds.captions])
    evidence = [
        data.evidence(data.query_nouns(t), row) for t, row in zip(data.trees, idx, strict=True)
    ]
    for i in range(len(idx)):
        pools["text-image"].add(
            caption_scores[i], relevant[i, idx[i]], "captions", novelty[i], words[i], evidence[i]
        )
    hit = idx == data.caption_image[:, None]
    own_rank = np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
    idx, vals = top_of(data.caption_scores(), top)
    for i in range(len(idx)):
        pools["image-caption"].add(vals[i], relevant[idx[i], i], "captions")
    return CaptionChecks(caption_scores, words, novelty, own_rank, evidence)


def similar_pool(data: SplitData, pools: Mapping[str, Pool], top: int = TOP) -> None:
    """photos → other photos, relevant when they share a consensus noun."""
    nouns = consensus_nouns(data)
    scores = data.photos @ data.photos.T
    np.fill_diagonal(scores, -np.inf)
    idx, vals = top_of(scores, top)
    for i in range(len(idx)):
        rel = np.array([bool(nouns[i] & nouns[j]) for j in idx[i]])
        pools["image-image"].add(vals[i], rel, "similar")


#: The concepts asked for: the held-out protocol's ten with their forms and kinds (a
#: jeep is a car). The open-vocabulary check's 40 words were tried too (dev): fewer absent
#: concepts came out "no match" (50 % against 80 %).
CONCEPTS: dict[str, tuple[str, ...]] = with_kinds(HELD_OUT)


#: The same concepts with their forms alone (the labels of the figures before ``HYPONYMS``).
FORMS_ONLY: dict[str, tuple[str, ...]] = dict(HELD_OUT)


@dataclass(frozen=True)
class ConceptRun:
    """One concept query on a split: its relevant photos and its top hits against the
    whole split (``present``) and the split less the concept's photos (``absent``)."""

    query: ConceptQuery
    single: bool
    relevant: frozenset[int]
    novelty: float
    present_idx: np.ndarray
    present_scores: np.ndarray
    absent_idx: np.ndarray
    absent_scores: np.ndarray
    present_evidence: np.ndarray | None = None
    absent_evidence: np.ndarray | None = None

    @property
    def words(self) -> int:
        return word_count(self.query.text)

    def judge(self, model: RelevanceModel, present: bool = True) -> np.ndarray:
        """Its hits' relevance (``present`` or absent), with evidence where it has some."""
        scores = self.present_scores if present else self.absent_scores
        evidence = self.present_evidence if present else self.absent_evidence
        table = features(scores, self.novelty, model.top, self.words, evidence)
        return model.model_for("text-image", model.top, evidence is not None).predict(table)


def concept_runs(
    data: SplitData,
    embed: EmbedFn,
    parse: ParseFn,
    top: int = TOP,
    concepts: Mapping[str, Sequence[str]] = CONCEPTS,
) -> list[ConceptRun]:
    """Every concept query with a relevant photo in the split, asked both ways."""
    single = single_queries(concepts)
    asked = single + compositional_queries(concepts)
    return query_runs(data, asked, {q.text for q in single}, embed, parse, top)


def everyday_runs(
    data: SplitData, embed: EmbedFn, parse: ParseFn, top: int = TOP
) -> list[ConceptRun]:
    """The everyday words present in the split, each a single-concept query asked both ways."""
    queries = present_queries(data.ds)
    return query_runs(data, queries, {q.text for q in queries}, embed, parse, top)


def query_runs(
    data: SplitData,
    asked: Sequence[ConceptQuery],
    singles: set[str],
    embed: EmbedFn,
    parse: ParseFn,
    top: int = TOP,
) -> list[ConceptRun]:
    """Each of ``asked`` with a relevant photo in the split, asked both ways."""
    queries = [q for q in asked if photos_mentioning(data.ds, *q.groups)]
    trees = parse([q.text for q in queries])
    vectors = embed(trees)
    runs = []
    for q, tree, vec, row in zip(queries, trees, vectors, data.text_scores(vectors), strict=True):
        relevant = frozenset(photos_mentioning(data.ds, *q.groups))
        # absent: the concept's own photos (any caption mentions it) left out
        own = photos_mentioning(data.ds, *q.groups[:1])
        p_idx, p_val = data.ranked(row, tree, top)
        masked = row.copy()
        masked[list(own)] = -np.inf
        a_idx, a_val = data.ranked(masked, tree, top)
        nouns, novelty = data.query_nouns(tree), novelty_of(vec, data.channel_columns)
        evidence = data.evidence(nouns, p_idx), data.evidence(nouns, a_idx)
        hits = (p_idx, p_val, a_idx, a_val, *evidence)
        runs.append(ConceptRun(q, q.text in singles, relevant, novelty, *hits))
    return runs


def concept_pool(runs: Sequence[ConceptRun], pools: Mapping[str, Pool]) -> None:
    pool = pools["text-image"]
    for r in runs:
        rel = np.array([int(i) in r.relevant for i in r.present_idx])
        pool.add(r.present_scores, rel, "concepts", r.novelty, r.words, r.present_evidence)
        absent = np.zeros(len(r.absent_idx), bool)
        pool.add(r.absent_scores, absent, "concepts-absent", r.novelty, r.words, r.absent_evidence)


def arithmetic_pool(
    data: SplitData, embed: EmbedFn, parse: ParseFn, pools: Mapping[str, Pool], top: int = TOP
) -> None:
    """``photo − A + B`` from photos of A (not B); relevant when the hit mentions B."""
    words = photo_words(data.trees, data.caption_image, len(data.ds.images))
    for pair in parse_pairs(DEFAULT_PAIRS):
        a_vec, b_vec = embed(parse([pair.a.text, pair.b.text]))
        has_a, has_b = mentions(words, pair.a), mentions(words, pair.b)
        starts = np.flatnonzero(has_a & ~has_b)[:MAX_STARTS]
        for s in starts:
            query = arithmetic_query(data.photos[s], [b_vec], [a_vec], data.channel_columns)
            row = data.photos @ query
            row[s] = -np.inf
            idx, vals = top_of(row[None, :], top)
            pools["arithmetic"].add(vals[0], has_b[idx[0]], pair.label)


def gather(
    data: SplitData,
    embed: EmbedFn,
    parse: ParseFn,
    top: int = TOP,
    concepts: Mapping[str, Sequence[str]] = CONCEPTS,
) -> tuple[dict[str, Pool], list[ConceptRun], CaptionChecks]:
    """Every kind's pooled hits on a split, the concept runs and the caption checks."""
    pools = {k: Pool() for k in QUERY_KINDS}
    checks = caption_pools(data, pools, top)
    similar_pool(data, pools, top)
    runs = concept_runs(data, embed, parse, top, concepts)
    concept_pool(runs, pools)
    arithmetic_pool(data, embed, parse, pools, top=top)
    return pools, runs, checks


def gather_all(
    splits: Sequence[SplitData],
    embed: EmbedFn,
    parse: ParseFn,
    top: int = TOP,
    concepts: Mapping[str, Sequence[str]] = CONCEPTS,
) -> tuple[dict[str, Pool], list[ConceptRun], CaptionChecks]:
    """``gather`` on each collection's split (each query within its own), pooled."""
    gathered = [gather(data, embed, parse, top, concepts) for data in splits]
    pools, runs, _ = gathered[0]
    for more, more_runs, _ in gathered[1:]:
        for kind, pool in more.items():
            pools[kind].extend(pool)
        runs = runs + more_runs
    return pools, runs, CaptionChecks.joined([checks for _, _, checks in gathered])
