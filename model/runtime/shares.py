"""Each word's share of the sentence vector of a tree RNN (SDT-RNN / DT-RNN).

With the gains ``g_i = h_i / a_i`` Eq. 4 is linear in the word terms: the root vector
splits into ``g_k ⊙ W_v x_k / ℓ_k``, becoming ``g_p ⊙ (ℓ_j/ℓ_p) W_{m(p,j)} c`` at each
step up; a share is ``<c_k, h> / |h|²`` (they sum to 1). f must vanish at 0."""

from __future__ import annotations

import numpy as np
import torch

from groundsearch.model.runtime.encoders.tree_rnn import TreeRNN
from groundsearch.model.runtime.joint import JointModel
from groundsearch.model.runtime.parsing.tree import DependencyTree


def supports_shares(model: JointModel) -> bool:
    """Shares are defined for the Eq. 4 encoders whose f(0) = 0."""
    return isinstance(model.encoder, TreeRNN) and model.encoder.nonlinearity != "sigmoid"


@torch.no_grad()
def _member_shares(member: JointModel, tree: DependencyTree) -> np.ndarray:
    enc: TreeRNN = member.encoder  # type: ignore[assignment]
    batch = member.prepare([tree])
    _, h = enc(batch, return_nodes=True)
    pre = enc.embed(batch.word_ids) @ enc.W_v.T
    sizes = enc.weights(batch).to(pre.dtype)
    n, eye = pre.shape[0], torch.eye(enc.hidden)
    ids = batch.matrix_ids.tolist()
    mats = [eye if m == enc.n_matrices or m < 0 else enc.W[m] for m in ids]
    parents = batch.parents.tolist()
    acc = torch.zeros_like(pre)
    for j in range(n):
        if parents[j] >= 0:
            acc[parents[j]] += sizes[j] * (mats[j] @ h[j])
    a = (pre + acc) / sizes[:, None]
    gain = torch.where(a.abs() > 1e-6, h / torch.where(a == 0, 1.0, a), torch.ones_like(a))
    target = h[int(batch.roots[0])]
    shares = np.zeros(n)
    for k in range(n):
        c = gain[k] * pre[k] / sizes[k]
        j = k
        while parents[j] >= 0:
            p = parents[j]
            c = gain[p] * (sizes[j] / sizes[p]) * (mats[j] @ c)
            j = p
        shares[k] = float(c @ target)
    return shares / float(target @ target)


def node_shares(model: JointModel, tree: DependencyTree) -> list[float]:
    """Each node's share of the sentence vector, in the tree's node order."""
    return np.mean([_member_shares(m, tree) for m in model.members()], axis=0).tolist()
