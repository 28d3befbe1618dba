"""The GloVe pretrain is rebuilt from the PyPI package, word for word."""

from __future__ import annotations

import numpy as np

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain
from groundsearch.model.runtime.text.glove import load_glove


def test_pretrain_holds_every_glove_vector():
    from stanza.models.common.pretrain import Pretrain

    words, vectors = load_glove()
    pretrain = Pretrain(str(ensure_pretrain(get_settings().cache_dir)))
    assert len(pretrain) == len(words) + 4  # stanza's four reserved rows come first
    for word in ["the", "dog", "helmet", "beach"]:
        row = pretrain.vocab.unit2id(word)
        np.testing.assert_array_equal(pretrain.emb[row].numpy(), vectors[words.index(word)])
