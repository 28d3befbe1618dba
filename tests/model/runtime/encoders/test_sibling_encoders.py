"""The sibling papers' encoders: Tree-LSTM, word LSTM/GRU, character bi-GRU."""

from __future__ import annotations

import torch

from groundsearch.model.runtime.encoders.recurrent import CharGRUAttention, WordRNN, char_batch
from groundsearch.model.runtime.encoders.sequence import word_batch
from groundsearch.model.runtime.encoders.tree_batch import make_batch
from groundsearch.model.runtime.encoders.tree_lstm import ChildSumTreeLSTM
from tests.paper_trees import students, toy_vocab


def vocab():
    return toy_vocab(dim=4)


def tree_lstm_reference(model, tree, voc):
    """Child-sum Tree-LSTM by recursion, node by node."""

    def node(i):
        x = model.embed(torch.tensor(voc.index(tree[i].text)))
        kids = [node(c.index) for c in tree.children(i)]
        h_sum = sum((h for h, _ in kids), torch.zeros(model.size))
        i_g, o_g, u = (model.W_iou(x) + model.U_iou(h_sum)).chunk(3)
        c = torch.sigmoid(i_g) * torch.tanh(u)
        for h_k, c_k in kids:
            c = c + torch.sigmoid(model.W_f(x) + model.U_f(h_k)) * c_k
        return torch.sigmoid(o_g) * torch.tanh(c), c

    return model.out(node(tree.root.index)[0])


def test_batched_tree_lstm_equals_recursion():
    tree, voc = students(), vocab()
    model = ChildSumTreeLSTM(voc.vectors, hidden=3, rnn_hidden=5)
    got = model(make_batch([tree, tree], voc, lambda t: [0] * len(t)))
    want = tree_lstm_reference(model, tree, voc)
    torch.testing.assert_close(got[0], want)
    torch.testing.assert_close(got[1], want)


def test_word_rnn_ignores_padding():
    voc = vocab()
    for cell in ("lstm", "gru"):
        model = WordRNN(voc.vectors, hidden=3, rnn_hidden=5, cell=cell)
        both = model(word_batch([[1, 2, 3], [4]]))
        torch.testing.assert_close(both[1], model(word_batch([[4]]))[0])


def test_char_gru_attention_weights_sum_to_one_over_real_characters():
    model = CharGRUAttention(hidden=3, rnn_hidden=6)
    out, weights = model(char_batch(["A dog runs.", "Hi"]), return_weights=True)
    assert out.shape == (2, 3)
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(2))
    assert torch.all(weights[1, 2:] == 0)
    torch.testing.assert_close(out[1], model(char_batch(["Hi"]))[0])
