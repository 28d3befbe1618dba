"""Words to vectors: the vocabulary over GloVe 6B 50-d."""

from model.text.vocab import UNK, Vocabulary

__all__ = ["UNK", "Vocabulary"]
