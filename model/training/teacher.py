"""Teachers for distillation (``TrainConfig.distill``): saved joint models, ensembled as
``evaluate --with`` does, that embed the training split once for the loop to read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from groundsearch.model.runtime.checkpoints import CheckpointError, load_checkpoint
from groundsearch.model.runtime.embedder import JointEmbedder
from groundsearch.model.runtime.kcca import unit
from groundsearch.model.runtime.parsing.tree import DependencyTree


@dataclass
class Teacher:
    """A training split's captions and photos in the teachers' space (float16 rows)."""

    captions: np.ndarray
    images: np.ndarray

    def scores(self, image_rows: np.ndarray, caption_rows: np.ndarray) -> torch.Tensor:
        """The teachers' mean score of each image row with each caption row (float32)."""
        v = self.images[image_rows].astype(np.float32)
        y = self.captions[caption_rows].astype(np.float32)
        return torch.from_numpy(v @ y.T)


def teach(
    checkpoints: Sequence[Path],
    trees: Sequence[DependencyTree],
    features: np.ndarray,
    parser: str,
    backbone: str,
) -> Teacher:
    """The ensemble of ``checkpoints`` (joint models on the split's backbone, read with
    their concept channels off) on these captions and photos."""
    if not checkpoints:
        raise ValueError("a teacher needs at least one checkpoint")
    captions, images = [], []
    for path in checkpoints:
        model = load_checkpoint(Path(path), parser=parser, concept_weight=0)
        if not isinstance(model, JointEmbedder):
            raise CheckpointError(f"{path}: a teacher must be a joint model, not kCCA")
        if model.backbone != backbone:
            raise CheckpointError(
                f"{path} reads {model.backbone} features; the student reads {backbone}"
            )
        # unit rows: each model's score is then its cosine
        captions.append(unit(model.embed_sentences(trees)))
        images.append(unit(model.embed_images(features)))
    scale = 1 / np.sqrt(len(checkpoints))
    return Teacher(
        (np.concatenate(captions, 1) * scale).astype(np.float16),
        (np.concatenate(images, 1) * scale).astype(np.float16),
    )
