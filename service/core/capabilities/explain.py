"""The query's dependency tree and each node's share of its sentence vector."""

from __future__ import annotations

from dataclasses import dataclass

from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.parsing import DependencyTree
from groundsearch.service.core.queries import QueryVectors
from groundsearch.service.core.timing import Stages, Timings


@dataclass(eq=False)
class Explain:
    """``/explain``."""

    model: Embedder
    queries: QueryVectors
    stages: Stages

    @property
    def encoder(self) -> str:
        return self.model.encoder

    def clean(self, text: str) -> str:
        """The text as cleaned (once, at the route); UnusableText if it cannot be used."""
        return self.queries.clean(text)

    def run(self, cleaned: str) -> tuple[DependencyTree, list[float] | None, Timings]:
        """The tree of a cleaned text and each node's share of its vector (or None)."""
        timings: Timings = {}
        tree = self.queries.trees([cleaned], ["text"], timings)[0]
        with self.stages.stage("encode", timings):
            shares = self.model.shares(tree)
        return tree, shares, timings
