"""Photo files → CNN features: the interface every backend (``pool.FeaturePool``,
``ray_pool.RayFeaturePool``) offers, and the ``PhotoBatchEmbedder`` they run."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self, TypeVar

import numpy as np
import torch
from PIL import Image

from groundsearch.model.runtime.images.backbones import get_spec
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.images.photos import PhotoError, Reason, decode_photo

T = TypeVar("T")
#: A photo's result as it crosses a process boundary (``PhotoError`` does not pickle).
Outcome = np.ndarray | tuple[Reason, str]


class FeatureBackend(Protocol):
    """Photo files → CNN features (a context manager): ``map`` gives each item with its
    features or ``PhotoError``, reading ``items`` lazily."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the workers (a later ``map`` starts them again where it can)."""
        ...

    def map(
        self, items: Iterable[T], path_of: Callable[[T], Path]
    ) -> Iterator[tuple[T, np.ndarray | PhotoError]]: ...


def check_identity(identity: str) -> None:
    """``BackboneError`` unless ``identity`` names a known backbone."""
    get_spec(identity.partition("-10crop")[0])


class PhotoBatchEmbedder:
    """What every backend's workers run: ``run(paths)`` gives each path's float32
    features or ``(reason, message)``, in order."""

    def __init__(self, identity: str, max_pixels: int) -> None:
        self.extractor = FeatureExtractor.for_identity(identity)
        self.max_pixels = max_pixels

    @classmethod
    def in_worker(cls, identity: str, max_pixels: int) -> PhotoBatchEmbedder:
        """A worker's embedder: torch on one thread, one core's worth of work."""
        torch.set_num_threads(1)
        return cls(identity, max_pixels)

    def run(self, paths: list[str]) -> list[Outcome]:
        """Each path's features or ``(reason, message)``, in order."""
        out: list[Outcome | None] = [None] * len(paths)
        images: list[Image.Image] = []
        good = []
        for i, path in enumerate(paths):
            try:
                img, _ = decode_photo(path, self.max_pixels, min_side=self.extractor.spec.resize)
            except PhotoError as exc:
                out[i] = (exc.reason, str(exc))
            except OSError as exc:
                out[i] = ("corrupt", f"{path}: cannot be read ({exc})")
            else:
                images.append(img)
                good.append(i)
        if images:
            try:
                vectors = list(self.extractor.embed_images(images))
            except Exception:  # one odd image: embed one by one to find it
                pairs = zip(good, images, strict=True)
                vectors = [self._embed_one(img, paths[i]) for i, img in pairs]
            for i, vector in zip(good, vectors, strict=True):
                out[i] = vector
        return [o for o in out if o is not None]

    def _embed_one(self, img: Image.Image, path: str) -> Outcome:
        try:
            return self.extractor.embed_images([img])[0]
        except Exception as exc:
            return ("corrupt", f"{path}: features failed ({exc})")


def as_result(outcome: Outcome) -> np.ndarray | PhotoError:
    """An outcome as ``map`` gives it: the features, or the ``PhotoError``."""
    return PhotoError(*outcome) if isinstance(outcome, tuple) else outcome
