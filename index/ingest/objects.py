"""The object detector over a gallery's photos: each photo's 80 scores stored once.

After an indexing pass or an upload, every photo without stored scores is run through
the detector in small batches, each committed on its own (a photo that cannot be read is
asked again next pass).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np
import torch

from groundsearch.index.gallery import Gallery
from groundsearch.index.store.records import insert_objects, lacking_objects
from groundsearch.model.runtime.images.photos import PhotoError
from groundsearch.model.runtime.objects.detector import ObjectDetector

#: Photos detected (and committed) at a time.
BATCH = 16


def detect_objects(
    gallery: Gallery,
    detector: ObjectDetector,
    progress: bool = False,
    stop: Callable[[], bool] | None = None,
    all_cores: bool = True,
) -> int:
    """Store the detector's scores of every photo of ``gallery`` without; how many.
    ``stop``: asked after each batch; ``all_cores``: torch on every core meanwhile."""
    from tqdm import tqdm

    todo = lacking_objects(gallery.records.reader(), gallery.folder)
    stored = 0
    with (
        every_core() if all_cores else nullcontext(),
        tqdm(total=len(todo), desc="objects", unit="photo", disable=not progress) as bar,
    ):
        for start in range(0, len(todo), BATCH):
            chunk = todo[start : start + BATCH]
            found = _scores(detector, [p for _, p in chunk])
            stored += store_objects(
                gallery, {i: s for (i, _), s in zip(chunk, found, strict=True) if s is not None}
            )
            bar.update(len(chunk))
            if stop is not None and stop():
                break
    return stored


@contextmanager
def every_core() -> Iterator[None]:
    """torch on every core while open (an indexing process's CNN workers are done)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def store_objects(gallery: Gallery, scores: Mapping[int, np.ndarray]) -> int:
    """Store photos' scores (photo id → its 80) in one transaction; how many were stored."""
    with gallery.records.transaction() as db:
        return insert_objects(db, scores)


def _scores(detector: ObjectDetector, paths: list[Path]) -> list[np.ndarray | None]:
    """Each file's scores, None for one that cannot be read."""
    try:
        return list(detector.score_files(paths))
    except (PhotoError, OSError):
        out: list[np.ndarray | None] = []
        for p in paths:
            try:
                out.append(detector.score_files([p])[0])
            except (PhotoError, OSError):
                out.append(None)
        return out
