"""Fitting and measuring the relevance model (``model.runtime.relevance``).

Every query is answered as the service answers it (its top ``TOP`` hits, best first),
each hit labelled relevant or not: captions → photos (``text-image``: its own photo and
every photo that fits its content, ``caption_photo_relevant``), photos → captions
(``image-caption``, the same rule), photos → photos (``image-image``: sharing a consensus
noun), the held-out-concept queries (``text-image``: a caption of the photo mentions the
concept; asked against the split and against the split less the concept's photos) and
``photo − "A" + "B"`` (``arithmetic``: the hit's captions mention B).

``fit`` fits each kind's logistic + isotonic model on dev (5 folds grouped by query),
``choose_threshold`` picks the default ``min_relevance`` and ``measure`` gives the figures
on a split. With the photos' top classes (``SplitData.classes``) a text query's hits carry
evidence (``model.runtime.evidence``), read by the models ``fit_evidence`` fits.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from groundsearch.model.data.flickr import CaptionedImages, DatasetError
from groundsearch.model.data.held_out_concepts import HELD_OUT, photos_mentioning, with_kinds
from groundsearch.model.runtime.arithmetic import arithmetic_query
from groundsearch.model.runtime.concepts import NOUNS
from groundsearch.model.runtime.evidence import (
    NounClasses,
    evidence_channels,
    evidence_nouns,
    joined,
    noun_words,
    top_of,
)
from groundsearch.model.runtime.fusion import Fusion, content_words
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.relevance import (
    FEATURES,
    QUERY_KINDS,
    SMALL_FEATURES,
    TOP,
    KindModel,
    RelevanceModel,
    features,
    novelty_of,
    word_count,
)
from groundsearch.model.runtime.tagger import WordTagger, row_products
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

#: Start photos per arithmetic pair (the first ones of the split).
MAX_STARTS = 25
#: Captions of a photo that must use a noun for it to be the photo's consensus noun.
CONSENSUS = 3
#: Bins of the expected calibration error and the reliability diagram.
BINS = 15
#: The share of relevant top-5 hits a present concept must keep (choose_threshold).
KEEP = 0.9
#: The share of caption queries with their own photo in the top 5 that must keep it
#: above the default threshold (choose_threshold).
KEEP_CAPTIONS = 0.9

ParseFn = Callable[[list[str]], list[DependencyTree]]
EmbedFn = Callable[[Sequence[DependencyTree]], np.ndarray]


@dataclass
class Pool:
    """Hits of many queries of one kind: features, labels, query ids, sources, evidence."""

    rows: list[np.ndarray] = field(default_factory=list)
    labels: list[np.ndarray] = field(default_factory=list)
    groups: list[np.ndarray] = field(default_factory=list)
    sources: list[np.ndarray] = field(default_factory=list)
    named: list[np.ndarray] = field(default_factory=list)
    queries: int = 0

    def add(
        self,
        scores: np.ndarray,
        relevant: np.ndarray,
        source: str,
        novelty: float = 0.0,
        words: int = 0,
        evidence: np.ndarray | None = None,
    ) -> None:
        """One query's hits: its top scores (best first), whether each is relevant, a
        text query's novelty and words, and each hit's evidence (None: none)."""
        self.rows.append(features(scores, novelty, words=words, evidence=evidence))
        self.labels.append(np.asarray(relevant, dtype=np.int8))
        self.groups.append(np.full(len(scores), self.queries))
        self.sources.append(np.full(len(scores), source))
        self.named.append(np.full(len(scores), evidence is not None))
        self.queries += 1

    def extend(self, other: Pool) -> None:
        """``other``'s hits after this pool's, its queries numbered after these."""
        self.rows += other.rows
        self.labels += other.labels
        self.groups += [g + self.queries for g in other.groups]
        self.sources += other.sources
        self.named += other.named
        self.queries += other.queries

    def arrays(
        self, sources: Sequence[str] | None = None, named: bool = False
    ) -> tuple[np.ndarray, ...]:
        """features, labels, groups, sources (of ``sources``' hits when given; of the
        queries with evidence when ``named``)."""
        x = np.concatenate(self.rows) if self.rows else np.zeros((0, len(FEATURES)))
        y, g, s, e = (
            np.concatenate(parts) if parts else np.zeros(0, kind)
            for parts, kind in (
                (self.labels, np.int8),
                (self.groups, int),
                (self.sources, str),
                (self.named, bool),
            )
        )
        keep = (e if named else np.ones(len(y), bool)) & self._of(s, sources)
        return x[keep], y[keep], g[keep], s[keep]

    @staticmethod
    def _of(s: np.ndarray, sources: Sequence[str] | None) -> np.ndarray:
        return np.ones(len(s), bool) if sources is None else np.isin(s, list(sources))

    def has_evidence(self, sources: Sequence[str] | None = None) -> np.ndarray:
        """Whether each hit (of ``sources`` when given) carries evidence."""
        e = np.concatenate(self.named) if self.named else np.zeros(0, bool)
        s = np.concatenate(self.sources) if self.sources else np.zeros(0, str)
        return e[self._of(s, sources)]


@dataclass
class SplitData:
    """A split embedded once: caption trees, photo and caption vectors; for evidence,
    each photo's top classes (ids, probabilities), the noun → classes table and tagger."""

    ds: CaptionedImages
    trees: list[DependencyTree]
    photos: np.ndarray
    captions: np.ndarray
    channel_columns: int
    classes: tuple[np.ndarray, np.ndarray] | None = None
    nouns: NounClasses | None = None
    tagger: WordTagger | None = None
    #: each photo's and caption's hubness penalty (``model.runtime.hubness``), as the
    #: service ranks them
    photo_penalty: np.ndarray | None = None
    caption_penalty: np.ndarray | None = None
    #: short queries' scores fused with their evidence (``model.runtime.fusion``), as
    #: the service ranks them
    fusion: Fusion | None = None

    @property
    def caption_image(self) -> np.ndarray:
        return np.asarray(self.ds.caption_image)

    def text_scores(self, vectors: np.ndarray) -> np.ndarray:
        """Text queries' scores of every photo (queries × photos), as ``/search`` ranks
        them: less each photo's penalty when the split has them."""
        scores = np.asarray(vectors) @ self.photos.T
        return scores if self.photo_penalty is None else scores - self.photo_penalty[None, :]

    def ranked_scores(self, vectors: np.ndarray, trees: Sequence[DependencyTree]) -> np.ndarray:
        """``text_scores`` with each short query's row fused with its evidence (``fused``)."""
        scores = self.text_scores(vectors)
        return np.stack([self.fused(row, t) for row, t in zip(scores, trees, strict=True)])

    def ranked(
        self, row: np.ndarray, tree: DependencyTree, top: int = TOP
    ) -> tuple[np.ndarray, np.ndarray]:
        """A text query's ``top`` photos as ``/search`` ranks them (``fused``) and their
        scores as its relevance reads them (``row``'s: the joint scores)."""
        idx, _ = top_of(self.fused(row, tree)[None, :], top)
        return idx[0], row[idx[0]]

    def fused(self, row: np.ndarray, tree: DependencyTree) -> np.ndarray:
        """A text query's scores of every photo (-inf: left out) as ``/search`` ranks
        them: fused with the photos' evidence when ``fusion`` applies to it."""
        if self.fusion is None:
            return row
        nouns, words = self.query_nouns(tree), content_words(tree)
        if not self.fusion.applies(words, len(nouns)):
            return row
        return self.fusion.fuse(row, *self.channels(nouns, np.arange(len(row))), words)

    def caption_scores(self) -> np.ndarray:
        """Every photo's scores of the split's captions (photos × captions), as
        ``/describe`` ranks them: less each caption's penalty when the split has them."""
        scores = self.photos @ self.captions.T
        return scores if self.caption_penalty is None else scores - self.caption_penalty[None, :]

    def novelty(self, vectors: np.ndarray) -> np.ndarray:
        return np.array([novelty_of(v, self.channel_columns) for v in vectors])

    def query_nouns(self, tree: DependencyTree) -> list[str]:
        """A text query's nouns with evidence (``evidence_nouns``; [] without)."""
        table = self.nouns if self.classes is not None else None
        return evidence_nouns(noun_words(tree), table, self.tagger)

    def evidence(self, nouns: Sequence[str], photos: np.ndarray) -> np.ndarray | None:
        """Each of ``photos``' evidence for ``nouns`` (None without: the larger of ``channels``)."""
        return joined(*self.channels(nouns, photos))

    def channels(
        self, nouns: Sequence[str], photos: np.ndarray
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Each of ``photos``' evidence for ``nouns`` from the classifier and from the
        tagger (``evidence_channels``)."""
        idx = np.asarray(photos, np.int64)
        classes = None if self.classes is None else (self.classes[0][idx], self.classes[1][idx])
        vectors = self.photos[idx]
        return evidence_channels(
            nouns, self.nouns, classes, self.tagger, lambda w: row_products(vectors, w)
        )


def caption_nouns(data: SplitData) -> list[frozenset[str]]:
    """Each caption's noun lemmas (lower case)."""
    return [frozenset(n.lemma.lower() for n in tree if n.upos in NOUNS) for tree in data.trees]


def consensus_nouns(data: SplitData, least: int = CONSENSUS) -> list[frozenset[str]]:
    """Each photo's noun lemmas used by at least ``least`` (or all) of its captions."""
    counts: list[Counter[str]] = [Counter() for _ in data.ds.images]
    captions = np.bincount(data.caption_image, minlength=len(counts))
    for nouns, image in zip(caption_nouns(data), data.caption_image, strict=True):
        counts[int(image)].update(nouns)
    return [
        frozenset(w for w, c in cnt.items() if c >= min(least, n))
        for cnt, n in zip(counts, captions, strict=True)
    ]


def main_nouns(data: SplitData, least: int = CONSENSUS) -> list[frozenset[str]]:
    """Each caption's noun lemmas that are consensus nouns of its own photo."""
    consensus = consensus_nouns(data, least)
    own = data.caption_image
    return [n & consensus[int(own[c])] for c, n in enumerate(caption_nouns(data))]


def subject_noun(tree: DependencyTree, main: frozenset[str]) -> str | None:
    """The main noun that is the caption's subject, else its root, else its first."""
    lemmas = [n.lemma.lower() for n in tree]
    for n, lemma in zip(tree, lemmas, strict=True):
        if n.deprel.startswith("nsubj") and lemma in main:
            return lemma
    if tree.root.lemma.lower() in main:
        return tree.root.lemma.lower()
    return next((lemma for lemma in lemmas if lemma in main), None)


def caption_photo_relevant(data: SplitData, least: int = CONSENSUS) -> np.ndarray:
    """captions × photos, True for the caption's own photo and each photo whose
    consensus nouns hold its subject (``subject_noun``) and half of its main nouns ("A
    black dog runs on the beach" fits a dog on grass, not a beach without a dog)."""
    consensus = consensus_nouns(data, least)
    main = main_nouns(data, least)
    subjects = [subject_noun(t, m) for t, m in zip(data.trees, main, strict=True)]
    vocab = {w: i for i, w in enumerate(sorted(set().union(*consensus, *main)))}
    has = np.zeros((len(consensus), len(vocab)), np.float32)
    for j, nouns in enumerate(consensus):
        has[j, [vocab[w] for w in nouns]] = 1.0
    wants = np.zeros((len(main), len(vocab)), np.float32)
    for c, nouns in enumerate(main):
        wants[c, [vocab[w] for w in nouns]] = 1.0
    covered = wants @ has.T  # the caption's main nouns each photo holds
    half = 2 * covered >= wants.sum(axis=1, keepdims=True)
    subject = np.zeros_like(half)
    for c, w in enumerate(subjects):
        if w is not None:
            subject[c] = has[:, vocab[w]] > 0
    relevant = half & subject
    relevant[np.arange(len(main)), data.caption_image] = True
    return relevant


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
    own = data.caption_image
    relevant = caption_photo_relevant(data)
    ranked = [
        data.ranked(row, tree, top)
        for row, tree in zip(data.text_scores(data.captions), data.trees, strict=True)
    ]
    idx = np.stack([i for i, _ in ranked])
    caption_scores = np.stack([s for _, s in ranked])
    novelty = data.novelty(data.captions)
    words = np.array([word_count(c) for c in data.ds.captions])
    evidence = [
        data.evidence(data.query_nouns(t), row) for t, row in zip(data.trees, idx, strict=True)
    ]
    for i in range(len(idx)):
        pools["text-image"].add(
            caption_scores[i], relevant[i, idx[i]], "captions", novelty[i], words[i], evidence[i]
        )
    hit = idx == own[:, None]
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
        return full_model(model, "text-image", evidence is not None).predict(table)


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
    scores = data.text_scores(vectors)
    runs = []
    for q, tree, vec, row in zip(queries, trees, vectors, scores, strict=True):
        relevant = frozenset(photos_mentioning(data.ds, *q.groups))
        # absent: the concept's own photos (any caption mentions it) left out
        own = photos_mentioning(data.ds, *q.groups[:1])
        p_idx, p_val = data.ranked(row, tree, top)
        masked = row.copy()
        masked[list(own)] = -np.inf
        a_idx, a_val = data.ranked(masked, tree, top)
        nouns = data.query_nouns(tree)
        runs.append(
            ConceptRun(
                q,
                q.text in singles,
                relevant,
                novelty_of(vec, data.channel_columns),
                p_idx,
                p_val,
                a_idx,
                a_val,
                data.evidence(nouns, p_idx),
                data.evidence(nouns, a_idx),
            )
        )
    return runs


def concept_pool(runs: Sequence[ConceptRun], pools: Mapping[str, Pool]) -> None:
    for r in runs:
        rel = np.array([int(i) in r.relevant for i in r.present_idx])
        pools["text-image"].add(
            r.present_scores, rel, "concepts", r.novelty, r.words, r.present_evidence
        )
        pools["text-image"].add(
            r.absent_scores,
            np.zeros(len(r.absent_idx), bool),
            "concepts-absent",
            r.novelty,
            r.words,
            r.absent_evidence,
        )


def arithmetic_pool(
    data: SplitData,
    embed: EmbedFn,
    parse: ParseFn,
    pools: Mapping[str, Pool],
    pairs: str = DEFAULT_PAIRS,
    top: int = TOP,
    max_starts: int = MAX_STARTS,
) -> None:
    """``photo − A + B`` from photos of A (not B); relevant when the hit mentions B."""
    words = photo_words(data.trees, data.caption_image, len(data.ds.images))
    for pair in parse_pairs(pairs):
        a_vec, b_vec = embed(parse([pair.a.text, pair.b.text]))
        has_a, has_b = mentions(words, pair.a), mentions(words, pair.b)
        starts = np.flatnonzero(has_a & ~has_b)[:max_starts]
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


#: The features each kind's model reads.
KIND_FEATURES: dict[str, tuple[str, ...]] = {
    # novelty is left out: no dev query has ρ near 1, so its weight would extrapolate
    "text-image": ("score", "mean", "lead", "log_words"),
    "image-caption": ("score", "mean", "lead"),
    "image-image": ("score", "mean", "lead"),
    "arithmetic": ("score", "mean", "lead"),
}


def fit_kind(
    x: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    names: Sequence[str],
    weights: np.ndarray | None = None,
    folds: int = 5,
    seed: int = 0,
) -> KindModel:
    """A logistic regression on standardised ``names`` columns, then an isotonic map."""
    from sklearn.isotonic import IsotonicRegression
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold

    cols = [FEATURES.index(n) for n in names]
    z = x[:, cols]
    mean, scale = z.mean(axis=0), z.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    z = (z - mean) / scale
    w = np.ones(len(y)) if weights is None else weights

    def logistic() -> LogisticRegression:
        return LogisticRegression(C=1.0, max_iter=1000)

    oof = np.zeros(len(y))
    splitter = GroupKFold(n_splits=folds, shuffle=True, random_state=seed)
    for tr, te in splitter.split(z, y, groups):
        oof[te] = logistic().fit(z[tr], y[tr], sample_weight=w[tr]).predict_proba(z[te])[:, 1]
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
    iso.fit(oof, y, sample_weight=w)
    final = logistic().fit(z, y, sample_weight=w)
    return KindModel(
        features=tuple(names),
        mean=mean,
        scale=scale,
        coef=final.coef_[0].astype(np.float64),
        intercept=float(final.intercept_[0]),
        iso_x=np.asarray(iso.X_thresholds_, np.float64),
        iso_y=np.asarray(iso.y_thresholds_, np.float64),
    )


def source_weights(sources: np.ndarray, share: Mapping[str, float]) -> np.ndarray:
    """Weights giving each named source ``share`` of the total (the rest share the rest)."""
    w = np.ones(len(sources))
    named = {s: f for s, f in share.items() if np.any(sources == s)}
    rest = ~np.isin(sources, list(named))
    left = 1.0 - sum(named.values())
    total = float(len(sources))
    for s, f in named.items():
        m = sources == s
        w[m] = f * total / m.sum()
    if rest.any():
        w[rest] = left * total / rest.sum()
    return w


#: Of the text → image fit's weight, what the concept queries carry (the captions carry
#: the rest). On dev, shares 0.25 / 0.15 / 0.1 / 0.05 gave a caption ECE of 0.078 / 0.047
#: / 0.033 / 0.018 and 6 / 6 / 5 / 1 of 10 absent concepts "no match": 0.1 keeps the ECE
#: under 0.05 with the most "no match" left.
CONCEPT_SHARE = {"concepts": 0.1, "concepts-absent": 0.1}


def fit(
    pools: Mapping[str, Pool],
    concept_share: Mapping[str, float] = CONCEPT_SHARE,
    names: Mapping[str, Sequence[str]] | None = None,
    named: bool = False,
) -> dict[str, KindModel]:
    """Each kind's model on its pooled hits (``named``: those with evidence), reading
    ``names[kind]`` (default ``KIND_FEATURES``), text → image weighted by ``concept_share``."""
    out = {}
    chosen = names or KIND_FEATURES
    for kind, pool in pools.items():
        if kind not in chosen:
            continue
        x, y, g, s = pool.arrays(named=named)
        if len(y) == 0 or y.min() == y.max():
            continue
        w = source_weights(s, concept_share) if kind == "text-image" else None
        out[kind] = fit_kind(x, y, g, chosen[kind], w)
    return out


#: The features of the evidence models (text → image only). On dev the concept AUROC was
#: 0.889 with the raw evidence, 0.899 with its log (which reads evidence ≈ 0 as a strong
#: sign against).
EVIDENCE_FEATURES: dict[str, tuple[str, ...]] = {
    "text-image": ("score", "mean", "lead", "log_words", "log_evidence"),
}
#: The same for galleries of fewer than ``TOP`` photos.
EVIDENCE_SMALL_FEATURES: dict[str, tuple[str, ...]] = {"text-image": ("score", "log_evidence")}


def fit_evidence(
    pools: Mapping[str, Pool],
    concept_share: Mapping[str, float] = CONCEPT_SHARE,
    names: Mapping[str, Sequence[str]] | None = None,
    small_names: Mapping[str, Sequence[str]] | None = None,
) -> tuple[dict[str, KindModel], dict[str, KindModel]]:
    """The evidence models and their small-gallery ones, on the hits with evidence."""
    full = fit(pools, concept_share, names or EVIDENCE_FEATURES, named=True)
    small = fit(pools, concept_share, small_names or EVIDENCE_SMALL_FEATURES, named=True)
    return full, small


def fit_small(
    pools: Mapping[str, Pool], concept_share: Mapping[str, float] = CONCEPT_SHARE
) -> dict[str, KindModel]:
    """Each kind's score-only model (``RelevanceModel.small``)."""
    return fit(pools, concept_share, {k: SMALL_FEATURES for k in pools})


def no_match_figures(
    runs: Sequence[ConceptRun], model: RelevanceModel, threshold: float, singles_only: bool = True
) -> dict[str, Any]:
    """At ``threshold``: the share of concept queries answered "no match" against the
    split less the concept's photos, and the share of relevant top-5 hits kept."""
    chosen = [r for r in runs if r.single or not singles_only]
    no_match, kept, relevant = [], 0, 0
    for r in chosen:
        absent = r.judge(model, present=False)
        no_match.append(bool(absent.max(initial=0.0) < threshold))
        present = r.judge(model)
        for i, p in zip(r.present_idx[:5], present[:5], strict=True):
            if int(i) in r.relevant:
                relevant += 1
                kept += bool(p >= threshold)
    return {
        "queries": len(chosen),
        "no_match_share": float(np.mean(no_match)) if no_match else 0.0,
        "relevant_top5": relevant,
        "kept_share": kept / relevant if relevant else 0.0,
    }


def caption_relevance(checks: CaptionChecks, model: RelevanceModel) -> np.ndarray:
    """The relevance of each caption query's top hits (queries × top), with evidence."""
    n, top = checks.scores.shape
    evidence = checks.evidence or [None] * n
    rows = [
        features(checks.scores[i], checks.novelty[i], model.top, int(checks.words[i]), e)
        for i, e in enumerate(evidence)
    ]
    table = np.concatenate([np.zeros((0, len(FEATURES))), *rows])
    named = np.repeat([e is not None for e in evidence], top).astype(bool)
    return predict_rows(model, "text-image", table, named).reshape(n, top)


def caption_figures(
    checks: CaptionChecks, relevance: np.ndarray, threshold: float
) -> dict[str, Any]:
    """At ``threshold``: the caption queries' "no match" share, and of those with their
    own photo in the top 5, the share keeping it."""
    rank = checks.own_rank
    in5 = (rank >= 0) & (rank < 5)
    own = relevance[np.flatnonzero(in5), rank[in5]]
    return {
        "queries": len(rank),
        "no_match_share": float(np.mean(relevance.max(axis=1) < threshold)) if len(rank) else 0.0,
        "own_in_top5": int(in5.sum()),
        "own_kept_share": float(np.mean(own >= threshold)) if len(own) else 0.0,
    }


def relevant_top5(runs: Sequence[ConceptRun]) -> int:
    """The relevant hits among the single-concept queries' top 5 (what ``keep`` counts)."""
    return sum(int(i) in r.relevant for r in runs if r.single for i in r.present_idx[:5])


def idle_rules(
    runs: Sequence[ConceptRun],
    checks: CaptionChecks | None = None,
    everyday: Sequence[ConceptRun] = (),
) -> list[str]:
    """The threshold rules with nothing to keep on this split (no relevant top-5 hit, no
    caption with its own photo in the top 5): ``choose_threshold`` skips them."""
    idle = []
    if not relevant_top5(runs):
        idle.append("concepts")
    if everyday and not relevant_top5(everyday):
        idle.append("everyday")
    if checks is not None and not ((checks.own_rank >= 0) & (checks.own_rank < 5)).any():
        idle.append("captions")
    return idle


def choose_threshold(
    runs: Sequence[ConceptRun],
    model: RelevanceModel,
    checks: CaptionChecks | None = None,
    keep: float = KEEP,
    keep_captions: float = KEEP_CAPTIONS,
    everyday: Sequence[ConceptRun] = (),
) -> float:
    """The highest threshold (grid 0.005) at which the single-concept queries keep
    ``keep`` of their relevant top-5 hits, the ``everyday`` words (``everyday_runs``)
    keep as much of theirs, and (with ``checks``) the caption queries keep their own
    photo in ``keep_captions`` of cases. A rule with nothing to keep (``idle_rules``) is
    skipped; DatasetError when every rule is."""
    idle = idle_rules(runs, checks, everyday)
    rules: list[Callable[[float], bool]] = []
    if "concepts" not in idle:
        rules.append(lambda t: no_match_figures(runs, model, t)["kept_share"] >= keep)
    if everyday and "everyday" not in idle:
        rules.append(lambda t: no_match_figures(everyday, model, t)["kept_share"] >= keep)
    if checks is not None and "captions" not in idle:
        relevance = caption_relevance(checks, model)
        rules.append(
            lambda t: caption_figures(checks, relevance, t)["own_kept_share"] >= keep_captions
        )
    if not rules:
        raise DatasetError(
            "no dev query has a relevant photo in its top 5 (no held-out concept, everyday "
            "word or caption query to keep): no threshold can be chosen on this split"
        )
    best = 0.0
    for t in np.round(np.arange(0.0, 1.0, 0.005), 3):
        if all(rule(float(t)) for rule in rules):
            best = float(t)
    return best


def calibration(p: np.ndarray, y: np.ndarray, bins: int = BINS) -> dict[str, Any]:
    """Expected calibration error and each equal-width bin's figures."""
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    rows, ece = [], 0.0
    for b in range(bins):
        m = which == b
        if not m.any():
            continue
        conf, rate = float(p[m].mean()), float(y[m].mean())
        ece += m.sum() / len(p) * abs(conf - rate)
        rows.append({"bin": b, "predicted": conf, "observed": rate, "hits": int(m.sum())})
    return {"ece": float(ece), "hits": len(p), "bins": rows}


def full_model(model: RelevanceModel, kind: str, evidence: bool = False) -> KindModel:
    """The model for a full top of ``kind``: with ``evidence`` its evidence model if any."""
    if evidence and kind in (model.evidence or {}):
        return (model.evidence or {})[kind]
    return model.kinds[kind]


def predict_rows(model: RelevanceModel, kind: str, x: np.ndarray, named: np.ndarray) -> np.ndarray:
    """The relevance of rows of ``features`` (``named``: judged with evidence)."""
    p = np.zeros(len(x))
    plain = ~named
    if plain.any():
        p[plain] = full_model(model, kind).predict(x[plain])
    if named.any():
        p[named] = full_model(model, kind, evidence=True).predict(x[named])
    return p


def predict_pool(
    model: RelevanceModel, kind: str, pool: Pool, sources: Sequence[str] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x, y, _, _ = pool.arrays(sources)
    p = predict_rows(model, kind, x, pool.has_evidence(sources))
    return p, y, x[:, FEATURES.index("score")]


def measure(
    pools: Mapping[str, Pool],
    runs: Sequence[ConceptRun],
    model: RelevanceModel,
    checks: CaptionChecks | None = None,
    short_threshold: float | None = None,
) -> dict[str, Any]:
    """The figures of ``model`` on a split's pools; "no match" of the single concepts at
    ``short_threshold`` when given, the caption queries at ``model.threshold``."""
    from sklearn.metrics import roc_auc_score

    out: dict[str, Any] = {"threshold": model.threshold}
    cal: dict[str, Any] = {}
    both_p, both_y = [], []
    for kind in ("text-image", "image-caption"):
        p, y, _ = predict_pool(model, kind, pools[kind], ["captions"])
        cal[kind] = calibration(p, y)
        both_p.append(p)
        both_y.append(y)
    cal["captions, both directions"] = calibration(np.concatenate(both_p), np.concatenate(both_y))
    for kind in ("image-image", "arithmetic"):
        if kind in model.kinds and pools[kind].queries:
            p, y, _ = predict_pool(model, kind, pools[kind])
            cal[kind] = calibration(p, y)
    out["calibration"] = cal
    p, y, score = predict_pool(model, "text-image", pools["text-image"], ["concepts"])
    out["concepts_auroc"] = {
        "queries": len(runs),
        "hits": len(y),
        "relevant": int(y.sum()),
        "relevance": float(roc_auc_score(y, p)),
        "score": float(roc_auc_score(y, score)),
    }
    singles = [r for r in runs if r.single]
    ps = np.concatenate([r.judge(model) for r in singles])
    ys = np.concatenate([[int(i) in r.relevant for i in r.present_idx] for r in singles])
    ss = np.concatenate([r.present_scores for r in singles])
    out["concepts_auroc"]["single"] = {
        "relevance": float(roc_auc_score(ys, ps)),
        "score": float(roc_auc_score(ys, ss)),
    }
    short = model.threshold if short_threshold is None else short_threshold
    out["short_threshold"] = short
    out["no_match"] = no_match_figures(runs, model, short)
    if checks is not None:
        out["caption_queries"] = caption_figures(
            checks, caption_relevance(checks, model), model.threshold
        )
    out["no_match"]["per_query"] = [
        {
            "query": r.query.text,
            "relevant": len(r.relevant),
            "evidence": r.present_evidence is not None and bool(model.evidence),
            "absent_best": round(float(r.judge(model, present=False).max()), 3),
            "present_top5": [round(float(v), 3) for v in r.judge(model)[:5]],
            "present_top5_relevant": [int(i) in r.relevant for i in r.present_idx[:5]],
        }
        for r in singles
    ]
    return out


def reliability_figure(figures: Mapping[str, Any], path: Any) -> None:
    """The reliability diagram of ``measure``'s calibration (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("full models (galleries of 20+ photos)", figures["calibration"])]
    if "score_only" in figures:
        panels.append(("score-only models (< 20 photos)", figures["score_only"]["calibration"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 5.0), dpi=110)
    for ax, (title, cal) in zip(np.atleast_1d(axes), panels, strict=True):
        ax.plot([0, 1], [0, 1], color="0.7", lw=1, ls="--", label="perfect")
        for kind in (k for k in QUERY_KINDS if k in cal):
            rows = cal[kind]["bins"]
            ax.plot(
                [r["predicted"] for r in rows],
                [r["observed"] for r in rows],
                marker="o",
                ms=3,
                label=f"{kind} (ECE {cal[kind]['ece']:.3f}, {cal[kind]['hits']} hits)",
            )
        ax.set_xlabel("relevance (predicted probability)")
        ax.set_ylabel("observed share relevant")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_title(f"Relevance reliability, Flickr8k test (top-20 hits)\n{title}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
