"""Words to vectors: the vocabulary over GloVe 6B 50-d."""

from groundsearch.model.runtime.text.vocab import UNK, NoKnownWordError, Vocabulary

__all__ = ["UNK", "NoKnownWordError", "Vocabulary"]
