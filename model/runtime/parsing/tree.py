"""Dependency trees as the SDT-RNN sees them: words, heads, relations and word counts."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

#: Relations whose dependents carry a preposition or subordinator worth folding in:
#: an ``obl`` child with ``case`` word "on" becomes ``obl:on`` (≈ Stanford's prep_on).
COLLAPSIBLE = frozenset({"obl", "nmod", "advcl", "acl"})
MARKERS = frozenset({"case", "mark"})


@dataclass(frozen=True)
class Node:
    """One word of a tree (CoNLL-U conventions: 1-based index, head 0 is the root)."""

    index: int
    text: str
    lemma: str
    upos: str
    xpos: str
    feats: str
    head: int
    deprel: str
    collapsed: str
    size: int


@dataclass(frozen=True)
class DependencyTree:
    """A parsed text: one node per word, in order, with exactly one root (a node's
    ``size`` is ℓ(i) of Eq. 4); later sentences hang off the first root as ``parataxis``."""

    text: str
    nodes: tuple[Node, ...]
    sentences: int = 1

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ValueError("a dependency tree needs at least one word")
        if (roots := sum(n.head == 0 for n in self.nodes)) != 1:
            raise ValueError(f"a dependency tree needs exactly one root, found {roots}")

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __getitem__(self, index: int) -> Node:
        """The node with 1-based CoNLL-U ``index``."""
        if not 1 <= index <= len(self.nodes):
            raise IndexError(f"word index {index} is outside 1..{len(self.nodes)}")
        return self.nodes[index - 1]

    @property
    def root(self) -> Node:
        return next(n for n in self.nodes if n.head == 0)

    @property
    def words(self) -> list[str]:
        return [n.text for n in self.nodes]

    def children(self, index: int) -> list[Node]:
        """Dependents of word ``index`` (0 gives the root), left to right."""
        return [n for n in self.nodes if n.head == index]

    def bottom_up(self) -> list[Node]:
        """Nodes ordered so that every child comes before its head."""
        order: list[Node] = []

        def visit(index: int) -> None:
            for child in self.children(index):
                visit(child.index)
                order.append(child)

        visit(0)
        return order

    def heights(self) -> list[int]:
        """Height of each node (leaves 0), in node order: nodes of equal height can be
        composed together across a batch of trees."""
        height = [0] * (len(self.nodes) + 1)
        for node in self.bottom_up():
            if node.head:
                height[node.head] = max(height[node.head], height[node.index] + 1)
        return height[1:]

    # --- serialization -------------------------------------------------------------

    def to_dict(self) -> dict[str, object]:
        nodes = [dict(vars(n)) for n in self.nodes]  # asdict's deep copies cost 6 x more
        return dict(text=self.text, sentences=self.sentences, nodes=nodes)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DependencyTree:
        nodes = tuple(Node(**n) for n in data["nodes"])
        return cls(text=str(data["text"]), nodes=nodes, sentences=int(data["sentences"]))

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> DependencyTree:
        return cls.from_dict(json.loads(text))

    def to_conllu(self) -> str:
        """CoNLL-U with the collapsed relation in the DEPS column (as enhanced UD does)."""
        lines = [f"# text = {' '.join(self.text.split())}"]
        for n in self.nodes:
            deps = f"{n.head}:{n.collapsed}"
            row = (n.index, n.text, n.lemma, n.upos, n.xpos or "_", n.feats or "_", n.head)
            lines.append("\t".join(map(str, (*row, n.deprel, deps, "_"))))
        return "\n".join(lines) + "\n"

    def pretty(self) -> str:
        """An indented drawing of the tree, one word a line."""
        lines: list[str] = []

        def draw(node: Node, prefix: str, last: bool, top: bool) -> None:
            branch = "" if top else ("└── " if last else "├── ")
            lines.append(
                f"{prefix}{branch}{node.text}  [{node.collapsed}, {node.upos}, ℓ={node.size}]"
            )
            kids = self.children(node.index)
            child_prefix = prefix if top else prefix + ("    " if last else "│   ")
            for i, kid in enumerate(kids):
                draw(kid, child_prefix, i == len(kids) - 1, False)

        draw(self.root, "", True, True)
        return "\n".join(lines)


def collapse_relations(
    words: Sequence[str], heads: Sequence[int], deprels: Sequence[str]
) -> list[str]:
    """The SDT-RNN relation of each word: the UD label, except that an ``obl``/``nmod``/
    ``advcl``/``acl`` dependent with a ``case`` or ``mark`` word is joined with it,
    lower-cased (``obl:near``), a multi-word marker with its ``fixed`` parts
    (``obl:because_of``). Words are 0-based here, heads 1-based as in CoNLL-U."""
    children: list[list[int]] = [[] for _ in range(len(words) + 1)]
    for i, h in enumerate(heads):
        children[h].append(i + 1)
    out = list(deprels)
    for i, base in enumerate(d.split(":")[0] for d in deprels):
        marks = (c for c in children[i + 1] if deprels[c - 1].split(":")[0] in MARKERS)
        if base in COLLAPSIBLE and (m := next(marks, 0)):
            parts = [m] + [f for f in children[m] if deprels[f - 1] == "fixed"]
            out[i] = f"{base}:{'_'.join(words[p - 1].lower() for p in parts)}"
    return out


def subtree_sizes(heads: Sequence[int]) -> list[int]:
    """ℓ(i) for every word: 1 + the sizes of its children (heads 1-based, 0 = root)."""
    n = len(heads)
    size = [1] * n
    depth = [0] * n
    for i in range(n):
        seen, j = 0, i
        while heads[j] != 0:
            j = heads[j] - 1
            seen += 1
            if seen > n:
                raise ValueError("the heads contain a cycle")
        depth[i] = seen
    for i in sorted(range(n), key=lambda k: -depth[k]):
        if heads[i]:
            size[heads[i] - 1] += size[i]
    return size


def build_tree(
    text: str,
    words: Sequence[str],
    lemmas: Sequence[str],
    upos: Sequence[str],
    xpos: Sequence[str],
    feats: Sequence[str],
    heads: Sequence[int],
    deprels: Sequence[str],
    sentences: int = 1,
) -> DependencyTree:
    """Make a tree from parallel CoNLL-U columns, computing collapsed relations and ℓ."""
    columns: tuple[Sequence[Any], ...] = (words, lemmas, upos, xpos, feats, heads, deprels)
    columns += (collapse_relations(words, heads, deprels), subtree_sizes(heads))
    nodes = tuple(Node(i + 1, *(c[i] for c in columns)) for i in range(len(words)))
    return DependencyTree(text=text, nodes=nodes, sentences=sentences)
