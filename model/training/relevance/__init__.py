"""Fitting and measuring the relevance model (``model.runtime.relevance``): every kind's
queries answered as the service answers them (``queries``), each hit labelled (``labels``);
``fit`` fits each kind's models, ``choose_threshold`` picks the default ``min_relevance``
and ``measure`` gives a split's figures."""

from __future__ import annotations

from groundsearch.model.training.relevance.fitting import (
    CONCEPT_SHARE,
    fit,
    fit_evidence,
    fit_small,
)
from groundsearch.model.training.relevance.measures import measure, reliability_figure
from groundsearch.model.training.relevance.queries import (
    CONCEPTS,
    FORMS_ONLY,
    everyday_runs,
    gather,
    gather_all,
)
from groundsearch.model.training.relevance.splits import EmbedFn, ParseFn, SplitData
from groundsearch.model.training.relevance.threshold import (
    KEEP,
    KEEP_CAPTIONS,
    caption_figures,
    caption_relevance,
    choose_threshold,
    idle_rules,
    no_match_figures,
)

__all__ = ["CONCEPTS", "CONCEPT_SHARE", "FORMS_ONLY", "KEEP", "KEEP_CAPTIONS", "EmbedFn",
    "ParseFn", "SplitData", "caption_figures", "caption_relevance", "choose_threshold",
    "everyday_runs", "fit", "fit_evidence", "fit_small", "gather", "gather_all",
    "idle_rules", "measure", "no_match_figures", "reliability_figure"]  # fmt: skip
