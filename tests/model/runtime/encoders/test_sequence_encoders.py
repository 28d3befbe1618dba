"""Bag of words and chain RNN: the paper's baselines, checked by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from groundsearch.model.runtime.encoders.sequence import BagOfWords, ChainRNN, word_batch

EMB = np.array([[0, 0], [1, 2], [3, 4], [5, 6]], dtype=np.float32)


def test_bag_of_words_is_the_mean_word_vector():
    model = BagOfWords(EMB, hidden=2, init_noise=0.0)
    out = model(word_batch([[1, 2], [3]])).detach().numpy()
    np.testing.assert_allclose(out, [[2, 3], [5, 6]])


def test_chain_rnn_by_hand_and_padding_does_not_leak():
    model = ChainRNN(EMB, hidden=2, init_noise=0.0)
    out = model(word_batch([[1, 2], [3]])).detach().numpy()
    h1 = np.tanh(EMB[1])
    np.testing.assert_allclose(out[0], np.tanh(h1 + EMB[2]), rtol=1e-6)
    np.testing.assert_allclose(out[1], np.tanh(EMB[3]), rtol=1e-6)


def test_gradients_reach_parameters():
    model = ChainRNN(EMB, hidden=2, init_noise=0.1)
    model(word_batch([[1, 2, 3]])).sum().backward()
    assert model.W_h.grad.abs().sum() > 0 and model.W_x.grad.abs().sum() > 0


def test_empty_sentence_is_an_error():
    with pytest.raises(ValueError, match="at least one word"):
        word_batch([[1], []])
    assert torch.is_tensor(word_batch([[1]])[0])
