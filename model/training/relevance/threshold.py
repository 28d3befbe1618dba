"""The default ``min_relevance``: the highest that keeps the relevant hits the rules ask for."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from groundsearch.model.data.flickr import DatasetError
from groundsearch.model.runtime.relevance import FEATURES, RelevanceModel, features
from groundsearch.model.training.relevance.pools import predict_rows
from groundsearch.model.training.relevance.queries import CaptionChecks, ConceptRun

#: The share of relevant top-5 hits a present concept must keep (choose_threshold).
KEEP = 0.9
#: The share of caption queries with their own photo in the top 5 that must keep it
#: above the default threshold (choose_threshold).
KEEP_CAPTIONS = 0.9


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
    """The highest threshold (grid 0.005) at which the single-concept queries and everyday
    words keep ``keep`` of their relevant top-5 hits and (with ``checks``) the caption
    queries their own photo in ``keep_captions`` of cases; DatasetError if no rule applies."""
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
