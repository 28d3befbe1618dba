"""What a trained SDT-RNN learned: its relation matrices ranked by size (paper §6.7).

Each matrix ``W[i]`` belongs to ``inventory.names[i]``; all start near the identity
(Frobenius norm ``sqrt(hidden)``), and a larger norm passes more of the child into the
parent.
"""

from __future__ import annotations

import math

import torch

from groundsearch.model.runtime.encoders.tree_batch import RelationInventory
from groundsearch.model.runtime.encoders.tree_rnn import TreeRNN
from groundsearch.model.runtime.joint import JointModel


def relation_norms(model: JointModel) -> list[tuple[str, float]]:
    """``(relation, Frobenius norm)`` of every SDT-RNN matrix, largest first (then by name);
    ValueError for another model."""
    encoder = model.config.encoder
    rnn = model.encoder
    if (
        encoder != "sdt-rnn"
        or not isinstance(model.inventory, RelationInventory)
        or not isinstance(rnn, TreeRNN)
    ):
        raise ValueError(
            f"only an sdt-rnn model has one matrix per dependency relation; this is {encoder}"
        )
    weights = rnn.W.detach()
    names = model.inventory.names
    if weights.shape[0] != len(names):
        raise ValueError(f"{weights.shape[0]} relation matrices but {len(names)} relation names")
    norms = torch.linalg.matrix_norm(weights.double(), ord="fro").tolist()
    return sorted(zip(names, norms, strict=True), key=lambda r: (-r[1], r[0]))


def identity_norm(model: JointModel) -> float:
    """Frobenius norm of the identity the relation matrices start near: ``sqrt(hidden)``."""
    return math.sqrt(model.config.hidden)


def format_ranking(ranking: list[tuple[str, float]], markdown: bool = False) -> str:
    """The ranking as aligned text, or as a Markdown table (names in code spans)."""
    if markdown:
        rows = ["| rank | relation | ‖W‖_F |", "| ---: | --- | ---: |"]
        for i, (name, norm) in enumerate(ranking, 1):
            cell = "`" + name.replace("|", "\\|") + "`"
            rows.append(f"| {i} | {cell} | {norm:.3f} |")
        return "\n".join(rows)
    width = max((len(name) for name, _ in ranking), default=8)
    rows = [f"{'rank':>4}  {'relation':<{width}}  {'norm':>8}"]
    rows += [f"{i:>4}  {n:<{width}}  {v:>8.3f}" for i, (n, v) in enumerate(ranking, 1)]
    return "\n".join(rows)
