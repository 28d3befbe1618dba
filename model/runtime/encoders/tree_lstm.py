"""Dependency Tree-LSTMs (Tai et al. 2015; Dufour et al.), composed level by level over a
``TreeBatch`` (children's sums with ``index_add``)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from groundsearch.model.runtime.encoders.tree_batch import TreeBatch
from groundsearch.model.runtime.encoders.words import word_embedding


class ChildSumTreeLSTM(nn.Module):
    """Root state of each tree, mapped to the joint space."""

    def __init__(
        self,
        embeddings: np.ndarray,
        hidden: int = 50,
        rnn_hidden: int = 150,
        freeze_words: bool = True,
        seed: int = 0,
        **_: object,
    ) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.embed = word_embedding(embeddings, freeze_words)
        self.size = rnn_hidden
        self.W_iou = nn.Linear(self.embed.embedding_dim, 3 * rnn_hidden)
        self.U_iou = nn.Linear(rnn_hidden, 3 * rnn_hidden, bias=False)
        self.W_f = nn.Linear(self.embed.embedding_dim, rnn_hidden)
        self.U_f = nn.Linear(rnn_hidden, rnn_hidden, bias=False)
        self.out = nn.Linear(rnn_hidden, hidden, bias=False)

    def forward(self, batch: TreeBatch) -> torch.Tensor:
        x = self.embed(batch.word_ids)
        n = x.shape[0]
        x_iou, x_f = self.W_iou(x), self.W_f(x)
        # h, c; Σ children h and Σ children f_k ⊙ c_k, filled as children finish
        h, c, h_sum, fc_sum = (x.new_zeros(n, self.size) for _ in range(4))
        for level in batch.levels:
            iou = x_iou[level] + self.U_iou(h_sum[level])
            i, o, u = iou.chunk(3, dim=1)
            c_l = torch.sigmoid(i) * torch.tanh(u) + fc_sum[level]
            h_l = torch.sigmoid(o) * torch.tanh(c_l)
            h, c = h.index_copy(0, level, h_l), c.index_copy(0, level, c_l)
            keep = batch.parents[level] >= 0
            if keep.any():
                parents = batch.parents[level[keep]]
                f = torch.sigmoid(x_f[parents] + self.U_f(h_l[keep]))
                h_sum = h_sum.index_add(0, parents, h_l[keep])
                fc_sum = fc_sum.index_add(0, parents, f * c_l[keep])
        return self.out(h[batch.roots])


class LeftRightTreeLSTM(nn.Module):
    """Dufour et al.'s left/right dependency Tree-LSTM (Appendix A): an N-ary Tree-LSTM
    whose positions ``s`` are a child's side and order (``ChildOrderInventory``), ``h̃_s``,
    ``c̃_s`` the summed states of the children in ``s``, ``h̃`` them side by side:

        i, o, u = σ, σ, tanh(W_iou x + U_iou h̃ + b_iou)      (U_iou: one block per position)
        f_s = σ(W_f^s x + U_f^s h̃_s + b_f^s)                  (a forget gate per position)
        c = i ⊙ u + Σ_s f_s ⊙ c̃_s,   h = o ⊙ tanh(c)
    """

    def __init__(
        self,
        embeddings: np.ndarray,
        n_positions: int,
        hidden: int = 50,
        rnn_hidden: int = 150,
        freeze_words: bool = True,
        seed: int = 0,
        **_: object,
    ) -> None:
        super().__init__()
        if n_positions < 1:
            raise ValueError("a left/right Tree-LSTM needs at least one child position")
        torch.manual_seed(seed)
        self.embed = word_embedding(embeddings, freeze_words)
        self.size, self.n_positions = rnn_hidden, n_positions
        d = self.embed.embedding_dim
        self.W_iou = nn.Linear(d, 3 * rnn_hidden)
        self.U_iou = nn.Linear(n_positions * rnn_hidden, 3 * rnn_hidden, bias=False)
        self.W_f = nn.Linear(d, n_positions * rnn_hidden)
        bound = 1.0 / np.sqrt(rnn_hidden)
        U_f = torch.empty(n_positions, rnn_hidden, rnn_hidden).uniform_(-bound, bound)
        self.U_f = nn.Parameter(U_f)
        self.out = nn.Linear(rnn_hidden, hidden, bias=False)

    def forward(self, batch: TreeBatch) -> torch.Tensor:
        x = self.embed(batch.word_ids)
        n, S, k = x.shape[0], self.n_positions, self.size
        x_iou, x_f = self.W_iou(x), self.W_f(x).view(n, S, k)
        h = x.new_zeros(n, k)
        # row parent·S + s: Σ h (and c) of the parent's children in s
        slot_h, slot_c = x.new_zeros(n * S, k), x.new_zeros(n * S, k)
        for depth, level in enumerate(batch.levels):
            iou = x_iou[level]
            if depth:  # height 0 are leaves: no children
                h_tilde = slot_h.view(n, S, k)[level]  # P × S × k
                iou = iou + self.U_iou(h_tilde.reshape(len(level), S * k))
                u_f = torch.einsum("psk,sjk->psj", h_tilde, self.U_f)
                f = torch.sigmoid(x_f[level] + u_f)
                fc = (f * slot_c.view(n, S, k)[level]).sum(1)
            i, o, u = iou.chunk(3, dim=1)
            c_l = torch.sigmoid(i) * torch.tanh(u)
            if depth:
                c_l = c_l + fc
            h_l = torch.sigmoid(o) * torch.tanh(c_l)
            h = h.index_copy(0, level, h_l)
            keep = batch.parents[level] >= 0
            if keep.any():
                children = level[keep]
                rows = batch.parents[children] * S + batch.matrix_ids[children]
                slot_h = slot_h.index_add(0, rows, h_l[keep])
                slot_c = slot_c.index_add(0, rows, c_l[keep])
        return self.out(h[batch.roots])
