"""Many trees flattened into one batch, grouped by height for level-wise composition.

Nodes of equal height across the whole batch are composed together (one matrix
product per relation group), instead of recursing node by node in Python.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import torch

from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.text.vocab import Vocabulary

OTHER = "<other>"


@dataclass(frozen=True)
class TreeBatch:
    """Flattened trees. Index ``k`` runs over all nodes of all trees.

    ``matrix_ids[k]`` picks the composition matrix for the edge from node ``k`` to its
    parent (``-1`` for roots); ``parents[k]`` is the parent's flat index (``-1`` for
    roots); ``levels[h]`` lists the nodes of height ``h``.
    """

    word_ids: torch.Tensor
    matrix_ids: torch.Tensor
    parents: torch.Tensor
    sizes: torch.Tensor
    levels: tuple[torch.Tensor, ...]
    roots: torch.Tensor


def make_batch(
    trees: Sequence[DependencyTree],
    vocab: Vocabulary,
    matrix_of: Callable[[DependencyTree], list[int]],
) -> TreeBatch:
    """Flatten ``trees``; ``matrix_of(tree)`` gives each node's matrix index."""
    if not trees:
        raise ValueError("an empty batch of trees")
    word_ids: list[int] = []
    matrix_ids: list[int] = []
    parents: list[int] = []
    sizes: list[float] = []
    height_of: list[int] = []
    roots: list[int] = []
    for tree in trees:
        offset = len(word_ids)
        word_ids += vocab.encode(tree.words)
        mats = matrix_of(tree)
        for node, m, h in zip(tree.nodes, mats, tree.heights(), strict=True):
            if node.head == 0:
                roots.append(offset + node.index - 1)
                matrix_ids.append(-1)
                parents.append(-1)
            else:
                matrix_ids.append(m)
                parents.append(offset + node.head - 1)
            sizes.append(float(node.size))
            height_of.append(h)
    by_height: dict[int, list[int]] = {}
    for k, h in enumerate(height_of):
        by_height.setdefault(h, []).append(k)
    levels = tuple(torch.tensor(by_height[h]) for h in sorted(by_height))
    return TreeBatch(
        word_ids=torch.tensor(word_ids),
        matrix_ids=torch.tensor(matrix_ids),
        parents=torch.tensor(parents),
        sizes=torch.tensor(sizes),
        levels=levels,
        roots=torch.tensor(roots),
    )


@dataclass(frozen=True)
class RelationInventory:
    """The SDT-RNN's matrices: one per frequent collapsed relation.

    A rare relation falls back to its base label (``obl:beneath`` → ``obl``) and then
    to one shared matrix (``<other>``, index 0).
    """

    names: tuple[str, ...]

    @classmethod
    def build(cls, trees: Iterable[DependencyTree], min_count: int = 5) -> RelationInventory:
        counts = Counter(n.collapsed for t in trees for n in t if n.head)
        for rel, c in list(counts.items()):
            counts[rel.split(":")[0]] += 0 if ":" not in rel else c
        kept = sorted(
            (r for r, c in counts.items() if c >= min_count), key=lambda r: (-counts[r], r)
        )
        return cls((OTHER, *kept))

    def __len__(self) -> int:
        return len(self.names)

    @cached_property
    def _lookup(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def index(self, relation: str) -> int:
        lookup = self._lookup
        return lookup.get(relation, lookup.get(relation.split(":")[0], 0))

    def matrix_of(self, tree: DependencyTree) -> list[int]:
        return [self.index(n.collapsed) for n in tree]


@dataclass(frozen=True)
class PositionInventory:
    """The DT-RNN's matrices, chosen by the child's side and distance (paper Eq. 3).

    ``l1`` is the word just left of its head, ``r2`` two words to the right, and so on.
    A distance never seen in training uses the identity (index ``len(self)``).
    """

    names: tuple[str, ...]

    @classmethod
    def build(cls, trees: Iterable[DependencyTree], max_distance: int = 0) -> PositionInventory:
        seen = {cls.position(n.index, n.head) for t in trees for n in t if n.head}
        if max_distance:
            seen = {p for p in seen if int(p[1:]) <= max_distance}
        return cls(tuple(sorted(seen, key=lambda p: (p[0], int(p[1:])))))

    @staticmethod
    def position(child: int, head: int) -> str:
        return f"l{head - child}" if child < head else f"r{child - head}"

    def __len__(self) -> int:
        return len(self.names)

    @property
    def identity(self) -> int:
        return len(self.names)

    @cached_property
    def _lookup(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    def matrix_of(self, tree: DependencyTree) -> list[int]:
        lookup = self._lookup
        return [
            lookup.get(self.position(n.index, n.head), self.identity) if n.head else -1
            for n in tree
        ]
