"""Eq. 4 of Socher et al. (2014) on the paper's "Students ride bikes at night" tree."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from groundsearch.model.runtime.encoders import tree_rnn
from groundsearch.model.runtime.encoders.tree_batch import (
    PositionInventory,
    RelationInventory,
    make_batch,
)
from groundsearch.model.runtime.encoders.tree_rnn import TreeRNN, block_identity
from tests.paper_trees import bikes_ride, students, toy_vocab


def reference(tree, vocab, W_v, W, matrix_of):
    """Eq. 4 by plain recursion, node by node."""
    mats = matrix_of(tree)

    def h(i):
        node = tree[i]
        total = W_v @ vocab.vectors[vocab.index(node.text)]
        for c in tree.children(i):
            m = W[mats[c.index - 1]] if mats[c.index - 1] < len(W) else np.eye(len(W_v))
            total = total + c.size * (m @ h(c.index))
        return np.tanh(total / node.size)

    return h(tree.root.index)


def test_sdt_rnn_equals_hand_computation():
    tree, vocab = students(), toy_vocab()
    rels = RelationInventory.build([tree], min_count=1)
    model = TreeRNN(vocab.vectors, hidden=4, n_matrices=len(rels), init_noise=0.3, seed=1)
    got = model(make_batch([tree], vocab, rels.matrix_of))[0].detach().numpy()
    want = reference(
        tree, vocab, model.W_v.detach().numpy(), model.W.detach().numpy(), rels.matrix_of
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_eq4_literal_values_with_zero_child_matrices():
    # With W = 0 only the root's own word counts, divided by ℓ(root) = 6.
    tree, vocab = students(), toy_vocab()
    model = TreeRNN(vocab.vectors, hidden=3, n_matrices=1, init_noise=0.0)
    with torch.no_grad():
        model.W.zero_()
    got = model(make_batch([tree], vocab, lambda t: [0] * len(t)))[0].detach().numpy()
    np.testing.assert_allclose(got, np.tanh(vocab.vectors[vocab.index("ride")] / 6), rtol=1e-6)


def test_batched_trees_match_one_at_a_time():
    vocab = toy_vocab()
    a, b = students(), bikes_ride()
    rels = RelationInventory.build([a, b], min_count=1)
    model = TreeRNN(vocab.vectors, hidden=4, n_matrices=len(rels), init_noise=0.2)
    both = model(make_batch([a, b, a], vocab, rels.matrix_of))
    for i, t in enumerate([a, b, a]):
        alone = model(make_batch([t], vocab, rels.matrix_of))[0]
        torch.testing.assert_close(both[i], alone)


@pytest.mark.parametrize("nonlinearity", ["tanh", "sigmoid", "relu", "none"])
@pytest.mark.parametrize("weighted", [True, False])
def test_inference_without_gradients_matches_forward(nonlinearity, weighted):
    # a query's few nodes are composed in numpy when no gradient is wanted; a child on
    # the identity (index n_matrices: a distance never seen) included
    vocab, a, b = toy_vocab(), students(), bikes_ride()
    short = PositionInventory(("l1", "r1"))
    model = TreeRNN(
        vocab.vectors, hidden=4, n_matrices=len(short), init_noise=0.3, seed=3,
        weighted=weighted, nonlinearity=nonlinearity,
    )  # fmt: skip
    batch = make_batch([a, b, a], vocab, short.matrix_of)
    assert len(batch.word_ids) <= tree_rnn.NUMPY_NODES
    roots, nodes = model(batch, return_nodes=True)  # gradients on: torch
    with torch.no_grad():
        fast_roots, fast_nodes = model(batch, return_nodes=True)
    torch.testing.assert_close(fast_roots, roots.detach())
    torch.testing.assert_close(fast_nodes, nodes.detach())
    if nonlinearity == "tanh" and weighted:
        want = reference(
            a, vocab, model.W_v.detach().numpy(), model.W.detach().numpy(), short.matrix_of
        )
        np.testing.assert_allclose(fast_roots[0].numpy(), want, rtol=1e-5, atol=1e-6)


def test_dt_rnn_picks_position_matrices_like_eq3():
    tree = students()
    pos = PositionInventory.build([tree])
    assert pos.names == ("l1", "r1", "r3", "r4")
    names = [pos.names[m] if 0 <= m < len(pos) else m for m in pos.matrix_of(tree)]
    assert names == ["l1", -1, "r1", "l1", "r3", "r4"]
    # a distance never seen in training uses the identity
    short = PositionInventory(("l1", "r1"))
    assert short.matrix_of(tree)[4] == short.identity == 2
    vocab = toy_vocab()
    model = TreeRNN(vocab.vectors, hidden=3, n_matrices=len(short), init_noise=0.3, seed=2)
    got = model(make_batch([tree], vocab, short.matrix_of))[0].detach().numpy()
    want = reference(
        tree, vocab, model.W_v.detach().numpy(), model.W.detach().numpy(), short.matrix_of
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_rare_relation_falls_back_to_base_then_shared():
    inv = RelationInventory(("<other>", "obl", "obl:on", "nsubj"))
    assert inv.index("obl:on") == 2
    assert inv.index("obl:beneath") == 1
    assert inv.index("vocative") == 0


def test_gradients_reach_every_parameter():
    tree, vocab = students(), toy_vocab()
    rels = RelationInventory.build([tree], min_count=1)
    model = TreeRNN(vocab.vectors, hidden=4, n_matrices=len(rels), freeze_words=False)
    model(make_batch([tree], vocab, rels.matrix_of)).sum().backward()
    used = set(rels.matrix_of(tree)) - {0}
    assert model.W_v.grad.abs().sum() > 0
    assert model.embed.weight.grad.abs().sum() > 0
    for m in used:
        assert model.W.grad[m].abs().sum() > 0


@pytest.mark.parametrize("shape", [(4, 4), (4, 2), (2, 4)])
def test_block_identity(shape):
    m = block_identity(*shape, noise=0.0)
    assert m.shape == shape
    assert m.sum() == max(shape)
