"""The vocabulary's known-word rule: punctuation alone is no word."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.model.runtime.text.vocab import NoKnownWordError, Vocabulary


def test_a_sentence_needs_a_known_word_with_a_letter_or_digit():
    words = ["<unk>", "dog", ".", "?", "!", "2"]
    vocab = Vocabulary(words, np.zeros((len(words), 2), np.float32))
    vocab.require_known([["A", "dog", "."], ["2"]], "query")
    for sentence in (["?"], [".", "!", "!"], ["zqxv", "."]):
        with pytest.raises(NoKnownWordError, match=r"query .*has no word the model knows"):
            vocab.require_known([sentence], "query")
