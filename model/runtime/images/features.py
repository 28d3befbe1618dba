"""Batched image feature extraction with an on-disk cache (SQLite in the cache folder),
keyed by the backbone and ``photo_key``."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from groundsearch.common.files import sha256_file
from groundsearch.model.runtime.images.backbones import DEFAULT_BACKBONE, build_backbone, preprocess
from groundsearch.model.runtime.images.photos import decode_photo, photo_orientation


def file_key(path: Path) -> str:
    return sha256_file(Path(path))[:32]


def photo_key(path: Path) -> str:
    """A photo's cache key: its digest, and ``:o<N>`` for an EXIF orientation N ≠ 1."""
    orientation = photo_orientation(path)
    return file_key(path) + (f":o{orientation}" if orientation != 1 else "")


class FeatureCache:
    """SQLite map from (backbone id, image digest) to a float32 vector."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS features "
            "(backbone TEXT, key TEXT, vec BLOB, PRIMARY KEY (backbone, key))"
        )

    def get(self, backbone: str, key: str) -> np.ndarray | None:
        with self._lock:
            row = self._db.execute(
                "SELECT vec FROM features WHERE backbone=? AND key=?", (backbone, key)
            ).fetchone()
        return None if row is None else np.frombuffer(row[0], dtype=np.float32).copy()

    def put_many(self, backbone: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        rows = [(backbone, k, np.asarray(v, np.float32).tobytes()) for k, v in items]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO features VALUES (?, ?, ?)", rows)
            self._db.commit()


class FeatureExtractor:
    """Photo → pooled CNN feature z of ``backbone`` (``BACKBONES``), batched and cached in
    ``cache_dir``/``features.sqlite`` (None: no cache); ``ten_crop`` averages 10 crops."""

    def __init__(
        self,
        backbone: str = DEFAULT_BACKBONE,
        ten_crop: bool = False,
        cache_dir: Path | None = None,
        batch_size: int = 16,
    ) -> None:
        self.net, self.spec = build_backbone(backbone)
        self.ten_crop, self.batch_size = ten_crop, batch_size
        self.transform = preprocess(self.spec, ten_crop=ten_crop)
        self.identity = f"{self.spec.name}{'-10crop' if ten_crop else ''}"
        self.cache = FeatureCache(Path(cache_dir) / "features.sqlite") if cache_dir else None

    @classmethod
    def for_identity(cls, identity: str, cache_dir: Path | None = None) -> FeatureExtractor:
        """The extractor whose ``identity`` is ``identity`` (what a checkpoint records)."""
        name, ten_crop, _ = identity.partition("-10crop")
        return cls(name, ten_crop=bool(ten_crop), cache_dir=cache_dir)

    @property
    def dim(self) -> int:
        return self.spec.dim

    @torch.inference_mode()
    def embed_images(self, images: Sequence[Image.Image]) -> np.ndarray:
        """Features of decoded images (no cache)."""
        out = []
        for start in range(0, len(images), self.batch_size):
            chunk = [self.transform(img) for img in images[start : start + self.batch_size]]
            x = torch.stack(chunk)
            flat = x.flatten(0, 1) if self.ten_crop else x
            feats = self.net(flat.contiguous(memory_format=torch.channels_last))
            out.append(feats.view(x.shape[0], 10, -1).mean(dim=1) if self.ten_crop else feats)
        return torch.cat(out).numpy().astype(np.float32)

    def embed_files(self, paths: Sequence[Path], progress: bool = False) -> np.ndarray:
        """Features of image files, in order, computing only those not cached."""
        label = f"features ({self.identity})" if progress else None
        args = (self.cache, self.identity, self.dim, self.batch_size * 4, label)
        return cached_rows(paths, self.embed_images, *args)


def cached_rows(
    paths: Sequence[Path],
    compute: Callable[[list[Image.Image]], np.ndarray],
    cache: FeatureCache | None,
    identity: str,
    dim: int,
    chunk: int,
    progress: str | None = None,
) -> np.ndarray:
    """One float32 row per photo file, in order, from ``cache`` or decoded and
    ``compute``d ``chunk`` at a time (``progress``: a progress bar's label)."""
    from tqdm import tqdm

    paths = [Path(p) for p in paths]
    keys = [photo_key(p) if p.exists() else "" for p in paths]
    rows: list[np.ndarray | None] = [cache.get(identity, k) if cache and k else None for k in keys]
    todo = [i for i, r in enumerate(rows) if r is None]
    with tqdm(total=len(todo), desc=progress, unit="img", disable=progress is None) as bar:
        for start in range(0, len(todo), chunk):
            idx = todo[start : start + chunk]
            found = list(zip(idx, compute([decode_photo(paths[i])[0] for i in idx]), strict=True))
            for i, v in found:
                rows[i] = v
            if cache:
                cache.put_many(identity, [(keys[i], v) for i, v in found])
            bar.update(len(idx))
    done = [r for r in rows if r is not None]
    return np.stack(done) if done else np.zeros((0, dim), np.float32)
