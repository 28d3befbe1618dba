"""Photos into the joint space: the image backbone (CNN), then the model's image encoder."""

from __future__ import annotations

import numpy as np
from PIL import Image

from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.evidence import photo_classes
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.service.core.timing import Stages, Timings


class PhotoVectors:
    """Decoded photos → joint-space vectors, timed as ``cnn`` and ``encode``."""

    def __init__(self, extractor: FeatureExtractor, model: Embedder, stages: Stages) -> None:
        self.extractor, self.model, self.stages = extractor, model, stages

    @property
    def min_side(self) -> int:
        """The shorter side photos are resized to for the backbone (decode no larger)."""
        return self.extractor.spec.resize

    def vector(self, image: Image.Image, timings: Timings) -> np.ndarray:
        return self.features_and_vector(image, timings)[1]

    def classes(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """One photo's most probable classes (the concept channel's; None without one)."""
        seen = photo_classes(self.model, features[None, :])
        return None if seen is None else (seen[0][0], seen[1][0])

    def features_and_vector(
        self, image: Image.Image, timings: Timings
    ) -> tuple[np.ndarray, np.ndarray]:
        """The photo's pooled backbone features and joint-space vector, from one CNN pass."""
        with self.stages.stage("cnn", timings):
            features = self.extractor.embed_images([image])
        with self.stages.stage("encode", timings):
            return features[0], self.model.embed_images(features)[0]
