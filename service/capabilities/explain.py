"""The query's dependency tree and each node's share of its sentence vector."""

from __future__ import annotations

from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.parsing import DependencyTree
from groundsearch.service.queries import QueryVectors
from groundsearch.service.timing import Stages, Timings


class Explain:
    """``/explain``."""

    def __init__(self, model: Embedder, queries: QueryVectors, stages: Stages) -> None:
        self.model, self.queries, self.stages = model, queries, stages

    @property
    def encoder(self) -> str:
        return self.model.encoder

    def clean(self, text: str) -> str:
        """The text as cleaned (once, at the route); UnusableText if it cannot be used."""
        return self.queries.clean(text)

    def run(self, cleaned: str) -> tuple[DependencyTree, list[float] | None, Timings]:
        """The tree of a cleaned text and each node's share of its vector (None if the
        encoder has no such decomposition)."""
        timings: Timings = {}
        tree = self.queries.trees([cleaned], ["text"], timings)[0]
        with self.stages.stage("encode", timings):
            shares = self.model.shares(tree)
        return tree, shares, timings
