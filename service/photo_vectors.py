"""Photos into the joint space: the image backbone (CNN), then the model's image encoder."""

from __future__ import annotations

import numpy as np
from PIL import Image

from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.service.timing import Stages, Timings


class PhotoVectors:
    """Decoded photos → joint-space vectors, timed as ``cnn`` and ``encode``."""

    def __init__(self, extractor: FeatureExtractor, model: Embedder, stages: Stages) -> None:
        self.extractor, self.model, self.stages = extractor, model, stages

    @property
    def min_side(self) -> int:
        """The shorter side photos are resized to for the backbone (decode no larger)."""
        return self.extractor.spec.resize

    def vector(self, image: Image.Image, timings: Timings) -> np.ndarray:
        with self.stages.stage("cnn", timings):
            features = self.extractor.embed_images([image])
        with self.stages.stage("encode", timings):
            return self.model.embed_images(features)[0]
