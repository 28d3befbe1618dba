"""Many trees flattened into one batch, grouped by height: nodes of equal height across
the batch are composed together (one product per matrix), not node by node in Python."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import torch

from groundsearch.model.runtime.encoders.words import Names
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.text.vocab import Vocabulary

OTHER = "<other>"


@dataclass(frozen=True)
class TreeBatch:
    """Flattened trees (index ``k`` over all nodes): ``matrix_ids[k]`` picks the matrix of
    node ``k``'s edge to its parent, ``parents[k]`` is its parent's index (``-1`` for
    roots) and ``levels[h]`` lists the nodes of height ``h``."""

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
    matrix_ids, parents, height_of, roots = [], [], [], []
    sizes: list[float] = []
    for tree in trees:
        offset = len(word_ids)
        word_ids += vocab.encode(tree.words)
        for node, m, h in zip(tree.nodes, matrix_of(tree), tree.heights(), strict=True):
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
    word, matrix, parent, size, root = map(
        torch.tensor, (word_ids, matrix_ids, parents, sizes, roots)
    )
    return TreeBatch(word, matrix, parent, size, levels, root)


@dataclass(frozen=True)
class RelationInventory(Names):
    """The SDT-RNN's matrices: one per frequent collapsed relation; a rare one falls back
    to its base label (``obl:beneath`` → ``obl``), then to ``<other>`` (index 0)."""

    @classmethod
    def build(cls, trees: Iterable[DependencyTree], min_count: int = 5) -> RelationInventory:
        counts = Counter(n.collapsed for t in trees for n in t if n.head)
        for rel, c in list(counts.items()):
            counts[rel.split(":")[0]] += 0 if ":" not in rel else c
        kept = sorted(
            (r for r, c in counts.items() if c >= min_count), key=lambda r: (-counts[r], r)
        )
        return cls((OTHER, *kept))

    def index(self, relation: str) -> int:
        lookup = self._lookup
        return lookup.get(relation, lookup.get(relation.split(":")[0], 0))

    def matrix_of(self, tree: DependencyTree) -> list[int]:
        return [self.index(n.collapsed) for n in tree]


@dataclass(frozen=True)
class PositionInventory(Names):
    """Child matrices by the child's side and word distance (``l1``: just left of its head,
    ``r2``: two words right; the ``dt-rnn-distance`` encoder). A distance never seen in
    training uses the identity (index ``len(self)``)."""

    @classmethod
    def build(cls, trees: Iterable[DependencyTree], max_distance: int = 0) -> PositionInventory:
        seen = {cls.position(n.index, n.head) for t in trees for n in t if n.head}
        if max_distance:
            seen = {p for p in seen if int(p[1:]) <= max_distance}
        return cls(tuple(sorted(seen, key=lambda p: (p[0], int(p[1:])))))

    @staticmethod
    def position(child: int, head: int) -> str:
        return f"l{head - child}" if child < head else f"r{child - head}"

    @property
    def identity(self) -> int:
        return len(self.names)

    def matrix_of(self, tree: DependencyTree) -> list[int]:
        lookup = self._lookup
        return [
            lookup.get(self.position(n.index, n.head), self.identity) if n.head else -1
            for n in tree
        ]


def child_orders(tree: DependencyTree) -> list[str]:
    """Each node's side and order among its head's children on that side, outwards from
    the head: ``l1`` the nearest left child, ``r2`` the second right (``""``: the root)."""
    orders = [""] * len(tree)
    # left children right to left, right children left to right: nearest the head first
    for side, nodes in (("l", reversed(tree.nodes)), ("r", tree.nodes)):
        seen = [0] * (len(tree) + 1)
        for n in nodes:
            if n.head and (n.index < n.head) == (side == "l"):
                seen[n.head] += 1
                orders[n.index - 1] = f"{side}{seen[n.head]}"
    return orders


@dataclass(frozen=True)
class ChildOrderInventory(Names):
    """The DT-RNN matrices (Socher et al. 2014, Eq. 1–3): one per side and order of the
    child (``l1``, …, ``r1``, …, nearest first); higher orders share the last."""

    def __post_init__(self) -> None:
        for side in "lr":
            orders = [int(n[1:]) for n in self.names if n[0] == side]
            if orders != list(range(1, len(orders) + 1)):
                raise ValueError(f"child orders must run l1, l2, … and r1, r2, …: {self.names}")

    @classmethod
    def build(
        cls, trees: Iterable[DependencyTree], min_count: int = 1, max_order: int = 0
    ) -> ChildOrderInventory:
        counts = Counter(o for t in trees for o in child_orders(t) if o)
        names = []
        for side in "lr":
            order = 1
            while counts[f"{side}{order}"] >= min_count and (not max_order or order <= max_order):
                names.append(f"{side}{order}")
                order += 1
            if order == 1:  # a side never seen still gets its one matrix
                names.append(f"{side}1")
        return cls(tuple(names))

    @cached_property
    def _last(self) -> dict[str, int]:
        return {side: sum(n[0] == side for n in self.names) for side in "lr"}

    def index(self, order: str) -> int:
        """The matrix of a child's order (``l3``); past the last kept order, the last."""
        side, k = order[0], int(order[1:])
        return self._lookup[f"{side}{min(k, self._last[side])}"]

    def matrix_of(self, tree: DependencyTree) -> list[int]:
        return [self.index(o) if o else -1 for o in child_orders(tree)]
