"""The DT-RNN and SDT-RNN of Socher et al. (2014), Eq. 4, composed level by level: a leaf
is ``h = f(W_v x)``, the sentence vector ``h`` at the root; ``m(i, j)`` is the child's
relation (SDT-RNN), side and order (DT-RNN) or side and distance (``dt-rnn-distance``);
index ``n_matrices`` is the fixed identity."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from groundsearch.model.runtime.encoders.tree_batch import TreeBatch
from groundsearch.model.runtime.encoders.words import word_embedding

#: The nonlinearities f a tree RNN can compose with.
NONLINEARITIES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "none": lambda a: a,
}
#: Batches of at most this many nodes are composed in numpy when no gradient is wanted
#: (larger ones: torch's products per matrix cost less than numpy's gathered matrices).
NUMPY_NODES = 64


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The function f called ``name``; ValueError naming the choices if there is none."""
    if name not in NONLINEARITIES:
        raise ValueError(f"unknown nonlinearity {name!r}; choose from {sorted(NONLINEARITIES)}")
    return NONLINEARITIES[name]


def block_identity(
    rows: int, cols: int, noise: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Identity blocks plus Gaussian noise (the paper's initialisation)."""
    eye = torch.zeros(rows, cols)
    for start in range(0, max(rows, cols), min(rows, cols)):
        for k in range(min(rows, cols)):
            r, c = (start + k, k) if rows > cols else (k, start + k)
            if r < rows and c < cols:
                eye[r, c] = 1.0
    return eye + noise * torch.randn(rows, cols, generator=generator)


class TreeRNN(nn.Module):
    """Eq. 4 over a batch of trees: ``embeddings`` (row 0 the unknown word), ``hidden``
    units, ``n_matrices`` child matrices initialised as identities plus ``init_noise``."""

    def __init__(
        self,
        embeddings: np.ndarray,
        hidden: int = 50,
        n_matrices: int = 1,
        freeze_words: bool = True,
        init_noise: float = 0.01,
        seed: int = 0,
        weighted: bool = True,
        nonlinearity: str = "tanh",
    ) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.f = activation(nonlinearity)
        self.weighted, self.nonlinearity = weighted, nonlinearity
        self.embed = word_embedding(embeddings, freeze_words)
        self.hidden, self.n_matrices = hidden, n_matrices
        self.W_v = nn.Parameter(block_identity(hidden, self.embed.embedding_dim, init_noise, g))
        matrices = [block_identity(hidden, hidden, init_noise, g) for _ in range(n_matrices)]
        self.W = nn.Parameter(torch.stack(matrices))

    def weights(self, batch: TreeBatch) -> torch.Tensor:
        """ℓ of every node (Eq. 4), or ones when unweighted (Eq. 1–3)."""
        return batch.sizes if self.weighted else torch.ones_like(batch.sizes)

    def forward(
        self, batch: TreeBatch, return_nodes: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Root vectors (trees × n); with ``return_nodes`` also every node's vector. A few
        trees without gradients (a query's) in numpy: half the time of torch's operations."""
        if len(batch.word_ids) <= NUMPY_NODES and not torch.is_grad_enabled():
            roots, nodes = (torch.from_numpy(a) for a in self._inference(batch))
            return (roots, nodes) if return_nodes else roots
        pre = self.embed(batch.word_ids) @ self.W_v.T
        h, acc = (pre.new_zeros(pre.shape[0], self.hidden) for _ in range(2))
        sizes = self.weights(batch).to(pre.dtype)
        # One view per matrix, taken once: indexing ``self.W[m]`` inside the loop would
        # make autograd allocate a full-size gradient for every (level, relation) pair.
        matrices = self.W.unbind(0)
        for level in batch.levels:
            h_level = self.f((pre[level] + acc[level]) / sizes[level, None])
            h = h.index_copy(0, level, h_level)
            keep = batch.parents[level] >= 0
            if not keep.any():
                continue
            children, h_children = level[keep], h_level[keep]
            mids = batch.matrix_ids[children]
            order, messages = [], []
            for m in torch.unique(mids).tolist():
                sel = (mids == m).nonzero(as_tuple=True)[0]
                hm = h_children[sel]
                messages.append(hm if m == self.n_matrices else hm @ matrices[m].T)
                order.append(sel)
            sel = torch.cat(order)
            msg = torch.cat(messages) * sizes[children[sel], None]
            acc = acc.index_add(0, batch.parents[children[sel]], msg)
        roots = h[batch.roots]
        return (roots, h) if return_nodes else roots

    def _inference(self, batch: TreeBatch) -> tuple[np.ndarray, np.ndarray]:
        """``forward``'s arithmetic in numpy: the roots' vectors and every node's. Each
        level's children in one batched product, each child with its own matrix."""
        matrices = self.W.detach().numpy()
        parents, matrix_ids = batch.parents.numpy(), batch.matrix_ids.numpy()
        sizes = self.weights(batch).numpy().astype(matrices.dtype)
        words = self.embed.weight.detach().numpy()[batch.word_ids.numpy()]
        pre = words @ self.W_v.detach().numpy().T
        h, acc = np.zeros_like(pre), np.zeros_like(pre)
        for level in (lv.numpy() for lv in batch.levels):
            h[level] = self.f(torch.from_numpy((pre[level] + acc[level]) / sizes[level, None]))
            children = level[parents[level] >= 0]
            if not len(children):
                continue
            messages, mids = h[children], matrix_ids[children]
            if (own := mids != self.n_matrices).any():  # the last index: the identity
                mats = matrices[mids[own]]
                messages[own] = np.einsum("kij,kj->ki", mats, messages[own])
            np.add.at(acc, parents[children], messages * sizes[children, None])
        return h[batch.roots.numpy()], h


class StackedTreeRNN(nn.Module):
    """Several TreeRNNs of the same shape (a snapshot ensemble) run as one with batched
    products; ``forward`` gives the members' root vectors, members × trees × n."""

    def __init__(self, members: list[TreeRNN]) -> None:
        super().__init__()
        first = members[0]
        self.hidden, self.n_matrices = first.hidden, first.n_matrices
        self.f, self.weighted = first.f, first.weighted
        self.embed = torch.stack([m.embed.weight.detach() for m in members])  # M × V × d
        self.W_v = torch.stack([m.W_v.detach() for m in members])  # M × n × d
        self.W = torch.stack([m.W.detach() for m in members])  # M × R × n × n

    @torch.no_grad()
    def forward(self, batch: TreeBatch) -> torch.Tensor:
        pre = torch.bmm(self.embed[:, batch.word_ids], self.W_v.transpose(1, 2))  # M×N×n
        h, acc = torch.zeros_like(pre), torch.zeros_like(pre)
        sizes = (batch.sizes if self.weighted else torch.ones_like(batch.sizes)).to(pre.dtype)
        for level in batch.levels:
            h_level = self.f((pre[:, level] + acc[:, level]) / sizes[level, None])
            h[:, level] = h_level
            keep = batch.parents[level] >= 0
            if not keep.any():
                continue
            children, h_children = level[keep], h_level[:, keep]
            mids = batch.matrix_ids[children]
            for m in torch.unique(mids).tolist():
                sel = (mids == m).nonzero(as_tuple=True)[0]
                hm = h_children[:, sel]
                if m != self.n_matrices:
                    hm = torch.bmm(hm, self.W[:, m].transpose(1, 2))
                acc.index_add_(1, batch.parents[children[sel]], hm * sizes[children[sel], None])
        return h[:, batch.roots]
