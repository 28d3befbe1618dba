"""The seed papers' encoders as published: Socher et al.'s DT-RNN (child order, Eq. 1–3
unweighted, the nonlinearity), Dufour et al.'s left/right Tree-LSTM and Merkx & Frank's
character encoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from groundsearch.model.runtime.checkpoints import load_joint, save_joint
from groundsearch.model.runtime.encoders.recurrent import CharInventory, MerkxFrankCharEncoder
from groundsearch.model.runtime.encoders.registry import (
    CharMFOptions,
    LeftRightOptions,
    TreeRNNOptions,
)
from groundsearch.model.runtime.encoders.tree_batch import (
    ChildOrderInventory,
    PositionInventory,
    child_orders,
    make_batch,
)
from groundsearch.model.runtime.encoders.tree_lstm import LeftRightTreeLSTM
from groundsearch.model.runtime.encoders.tree_rnn import TreeRNN
from groundsearch.model.runtime.joint import JointConfig, JointModel, build_inventory
from groundsearch.model.runtime.parsing.tree import build_tree
from groundsearch.model.runtime.shares import node_shares, supports_shares
from tests.paper_trees import bikes_ride, students, toy_vocab

F = {"tanh": np.tanh, "relu": lambda a: np.maximum(a, 0), "none": lambda a: a}
F["sigmoid"] = lambda a: 1 / (1 + np.exp(-a))


def three_right_children():
    """ "ride bikes at night ." with every word a right child of "ride"."""
    words = ["ride", "bikes", "fast", "today", "."]
    return build_tree(
        " ".join(words), words, words, ["VERB", "NOUN", "ADV", "NOUN", "PUNCT"],
        ["_"] * 5, ["_"] * 5, [0, 1, 1, 1, 1], ["root", "obj", "advmod", "obl", "punct"],
    )  # fmt: skip


def reference(tree, vocab, model, mats, weighted=True, f="tanh"):
    """Eq. 4 (or Eq. 1–3 when not ``weighted``) by plain recursion, node by node."""
    W_v, W = model.W_v.detach().numpy(), model.W.detach().numpy()

    def h(i):
        node = tree[i]
        total = W_v @ vocab.vectors[vocab.index(node.text)]
        for c in tree.children(i):
            ell = c.size if weighted else 1
            total = total + ell * (W[mats[c.index - 1]] @ h(c.index))
        return F[f](total / (node.size if weighted else 1))

    return h(tree.root.index)


def test_child_orders_count_children_on_each_side_from_the_head():
    # Students ride bikes at night . — "at" is the left child of "night"; "night" is the
    # second right child of "ride" (distance 3), "." the third (distance 4)
    assert child_orders(students()) == ["l1", "", "r1", "l1", "r2", "r3"]
    assert PositionInventory.build([students()]).names == ("l1", "r1", "r3", "r4")
    inv = ChildOrderInventory.build([students()], max_order=2)
    assert inv.names == ("l1", "r1", "r2")
    assert inv.matrix_of(students()) == [0, -1, 1, 0, 2, 2]  # r3 shares r2's matrix
    # rarer orders share the last order seen min_count times
    inv = ChildOrderInventory.build([students(), bikes_ride()], min_count=2)
    assert inv.names == ("l1", "r1")
    assert inv.matrix_of(students()) == [0, -1, 1, 0, 1, 1]
    with pytest.raises(ValueError, match="child orders must run"):
        ChildOrderInventory(("l1", "l3"))


@pytest.mark.parametrize("weighted", [True, False])
@pytest.mark.parametrize("f", ["tanh", "sigmoid", "relu", "none"])
def test_dt_rnn_by_child_order_equals_hand_computation(weighted, f):
    tree, vocab = students(), toy_vocab()
    inv = ChildOrderInventory.build([tree])
    model = TreeRNN(
        vocab.vectors, hidden=4, n_matrices=len(inv), init_noise=0.3, seed=2,
        weighted=weighted, nonlinearity=f,
    )  # fmt: skip
    got = model(make_batch([tree], vocab, inv.matrix_of))[0].detach().numpy()
    want = reference(tree, vocab, model, inv.matrix_of(tree), weighted, f)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_unweighted_is_eq4_without_ell_literal_values():
    # W_v = I, W = I (no noise), f = none: the unweighted root is the sum of all words,
    # the weighted one Eq. 4's ℓ-weighted mean
    tree, vocab = bikes_ride(), toy_vocab()
    x = {w: vocab.vectors[vocab.index(w)] for w in ("bikes", "ride")}
    for weighted, want in ((False, x["ride"] + x["bikes"]), (True, (x["ride"] + x["bikes"]) / 2)):
        model = TreeRNN(
            vocab.vectors, hidden=3, n_matrices=1, init_noise=0.0, weighted=weighted,
            nonlinearity="none",
        )  # fmt: skip
        got = model(make_batch([tree], vocab, lambda t: [0] * len(t)))[0]
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-6)


def test_bad_tree_rnn_options_are_named():
    with pytest.raises(ValueError, match="unknown nonlinearity 'softplus'"):
        TreeRNNOptions(nonlinearity="softplus")
    with pytest.raises(ValueError, match="max_child_order"):
        TreeRNNOptions(max_child_order=-1)
    with pytest.raises(ValueError, match="max_child_order"):
        LeftRightOptions(max_child_order=-1)
    with pytest.raises(ValueError, match="unknown char_cell"):
        CharMFOptions(char_cell="rnn")
    with pytest.raises(ValueError, match="unknown nonlinearity 'softplus'"):
        JointConfig.from_dict({"encoder": "dt-rnn", "nonlinearity": "softplus"})


def test_unweighted_relu_dt_rnn_round_trips(tmp_path):
    options = TreeRNNOptions(unweighted=True, nonlinearity="relu")
    config = JointConfig(encoder="dt-rnn", hidden=5, image_dim=4, options=options)
    trees = [students(), bikes_ride()]
    model = JointModel(config, toy_vocab(), build_inventory(config, trees), "p", "c")
    assert isinstance(model.inventory, ChildOrderInventory)
    save_joint(model, tmp_path / "m.pt")
    back = load_joint(tmp_path / "m.pt")
    assert back.config.options == options
    torch.testing.assert_close(back.encode_sentences(trees), model.encode_sentences(trees))


def test_old_distance_dt_rnn_checkpoint_still_loads(tmp_path):
    # a checkpoint of the previous dt-rnn: PositionInventory, no new config fields
    trees = [students(), bikes_ride()]
    config = JointConfig(encoder="dt-rnn-distance", hidden=5, image_dim=4)
    model = JointModel(config, toy_vocab(), build_inventory(config, trees), "p", "c")
    save_joint(model, tmp_path / "m.pt")
    state = torch.load(tmp_path / "m.pt", weights_only=False)
    state["config"] = {
        k: v
        for k, v in state["config"].items()
        if k not in ("unweighted", "nonlinearity", "max_child_order", "char_cell", "char_pooling")
    } | {"encoder": "dt-rnn"}
    torch.save(state, tmp_path / "old.pt")
    back = load_joint(tmp_path / "old.pt")
    assert isinstance(back.inventory, PositionInventory)
    torch.testing.assert_close(back.encode_sentences(trees), model.encode_sentences(trees))


# --- Dufour et al.'s left/right Tree-LSTM ---------------------------------------------------


def lr_reference(model, tree, voc, positions):
    """The left/right Tree-LSTM by recursion: each child's state goes to its position."""
    S, k = model.n_positions, model.size

    def node(i):
        x = model.embed(torch.tensor(voc.index(tree[i].text)))
        h_t, c_t = torch.zeros(S, k), torch.zeros(S, k)
        for c in tree.children(i):
            h_c, c_c = node(c.index)
            h_t[positions[c.index - 1]] += h_c
            c_t[positions[c.index - 1]] += c_c
        i_g, o_g, u = (model.W_iou(x) + model.U_iou(h_t.reshape(-1))).chunk(3)
        c = torch.sigmoid(i_g) * torch.tanh(u)
        x_f = model.W_f(x).view(S, k)
        for s in range(S):
            c = c + torch.sigmoid(x_f[s] + model.U_f[s] @ h_t[s]) * c_t[s]
        return torch.sigmoid(o_g) * torch.tanh(c), c

    return model.out(node(tree.root.index)[0])


def test_left_right_tree_lstm_equals_recursion():
    voc = toy_vocab(dim=4)
    trees = [students(), bikes_ride(), students()]
    inv = ChildOrderInventory.build(trees, max_order=3)
    model = LeftRightTreeLSTM(voc.vectors, n_positions=len(inv), hidden=3, rnn_hidden=5)
    got = model(make_batch(trees, voc, inv.matrix_of))
    for row, tree in zip(got, trees, strict=True):
        torch.testing.assert_close(row, lr_reference(model, tree, voc, inv.matrix_of(tree)))


def test_children_past_p_minus_1_share_one_position():
    # p = 2: the first right child has its own parameters, the second and third are
    # summed into one position, so swapping them changes nothing, while swapping the
    # first and second does
    tree = three_right_children()
    words = ["<unk>", "ride", "bikes", "fast", "today", "."]
    voc = type(toy_vocab())(words, np.random.default_rng(0).normal(size=(6, 4)).astype("f"))
    inv = ChildOrderInventory.build([tree], max_order=2)
    assert inv.names == ("l1", "r1", "r2") and inv.matrix_of(tree) == [-1, 1, 2, 2, 2]
    model = LeftRightTreeLSTM(voc.vectors, n_positions=len(inv), hidden=3, rnn_hidden=5)

    def encode(order):
        return model(make_batch([tree], voc, lambda t: order))[0]

    base = encode([-1, 1, 2, 2, 2])
    with torch.no_grad():  # "bikes" ↔ "fast" by swapping their word vectors
        swapped = model.embed.weight.clone()
        swapped[[2, 3]] = swapped[[3, 2]]
        model.embed.weight.copy_(swapped)
    assert not torch.allclose(encode([-1, 1, 2, 2, 2]), base)
    with torch.no_grad():  # restore, then swap "fast" ↔ "today": both in the summed slot
        swapped[[2, 3]] = swapped[[3, 2]]
        swapped[[3, 4]] = swapped[[4, 3]]
        model.embed.weight.copy_(swapped)
    torch.testing.assert_close(encode([-1, 1, 2, 2, 2]), base)


def test_tree_lstm_lr_checkpoint_round_trips(tmp_path):
    trees = [students(), bikes_ride()]
    options = LeftRightOptions(rnn_hidden=5)
    config = JointConfig(encoder="tree-lstm-lr", hidden=4, image_dim=3, options=options)
    model = JointModel(config, toy_vocab(dim=4), build_inventory(config, trees), "p", "c")
    assert model.inventory is not None and model.inventory.names == ("l1", "r1", "r2", "r3")
    with torch.no_grad():
        model.encoder.U_f.add_(0.5)  # type: ignore[operator]
    save_joint(model, tmp_path / "m.pt")
    back = load_joint(tmp_path / "m.pt")
    torch.testing.assert_close(back.encode_sentences(trees), model.encode_sentences(trees))


# --- Merkx & Frank's character encoder ------------------------------------------------------


def test_char_inventory_keeps_case_and_punctuation():
    inv = CharInventory.build(["A dog.", "a cat!"])
    assert inv.names == (" ", "!", ".", "A", "a", "c", "d", "g", "o", "t")
    ids, lengths = inv.batch(["Ab?", "a"])
    assert ids.tolist() == [[5, 1, 1], [6, 0, 0]] and lengths.tolist() == [3, 1]  # b, ? unseen


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_vector_attention_weights_sum_to_one_over_time_in_every_dimension(cell):
    inv = CharInventory.build(["A dog runs.", "Hi"])
    model = MerkxFrankCharEncoder(len(inv), hidden=8, rnn_hidden=4, cell=cell)
    out, weights = model(inv.batch(["A dog runs.", "Hi"]), return_weights=True)
    assert out.shape == (2, 8) and weights.shape == (2, 11, 8)
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(2, 8))
    assert torch.all(weights[1, 2:] == 0)
    assert not torch.allclose(weights[0, :, 0], weights[0, :, 1])  # element-wise weights
    torch.testing.assert_close(out[1], model(inv.batch(["Hi"]))[0])


def test_max_pooling_variant_and_size_check():
    inv = CharInventory.build(["A dog runs.", "Hi"])
    model = MerkxFrankCharEncoder(len(inv), hidden=8, rnn_hidden=4, pooling="max")
    batch = inv.batch(["A dog runs.", "Hi"])
    out = model(batch)
    torch.testing.assert_close(out[1], model(inv.batch(["Hi"]))[0])  # padding never wins
    states = model.rnn(model.embed(inv.batch(["Hi"])[0]))[0]
    torch.testing.assert_close(out[1], states[0].max(dim=0).values)
    with pytest.raises(ValueError, match="must be --hidden 8"):
        MerkxFrankCharEncoder(len(inv), hidden=6, rnn_hidden=4)


@pytest.mark.parametrize("unweighted,f", [(True, "tanh"), (True, "relu"), (False, "none")])
def test_word_shares_still_sum_to_one(unweighted, f):
    options = TreeRNNOptions(unweighted=unweighted, nonlinearity=f, init_noise=0.2)
    config = JointConfig(encoder="dt-rnn", hidden=5, image_dim=4, options=options)
    model = JointModel(config, toy_vocab(), build_inventory(config, [students()]), "p", "c")
    assert supports_shares(model)
    assert sum(node_shares(model, students())) == pytest.approx(1.0, abs=1e-4)


def test_sigmoid_models_have_no_word_shares():
    options = TreeRNNOptions(nonlinearity="sigmoid")
    config = JointConfig(encoder="dt-rnn", hidden=5, image_dim=4, options=options)
    model = JointModel(config, toy_vocab(), build_inventory(config, [students()]), "p", "c")
    assert not supports_shares(model)
