"""Small JPEGs of gallery photos for grids (``/images/{id}/thumbnail``), kept in memory.

An LRU cache bounded in bytes, keyed by the file's path, modification time and size.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import PIL

from groundsearch.model.runtime.images.photos import MAX_PIXELS, thumbnail_jpeg

#: The cache's bound: about 2,000 thumbnails of 256 pixels.
CACHE_BYTES = 48 * 2**20
#: Bumped when thumbnails are made differently (it is part of their ETag).
VERSION = 1


@dataclass(frozen=True)
class Thumbnail:
    """A thumbnail's JPEG bytes and its validators."""

    data: bytes
    etag: str
    mtime: float


def thumbnail_etag(sha256: str, stat: os.stat_result, size: int) -> str:
    """A thumbnail's ETag: the photo's hash, its file's state, the size and this module's
    and Pillow's versions (the same tag is the same bytes)."""
    made = f"thumbnail-{VERSION}-pillow-{PIL.__version__}"
    text = f"{sha256}-{stat.st_mtime_ns}-{stat.st_size}-{size}-{made}"
    return '"' + hashlib.md5(text.encode(), usedforsecurity=False).hexdigest() + '"'


class Thumbnails:
    """Thumbnails made on demand and kept up to ``max_bytes`` (least recently used out)."""

    def __init__(self, max_bytes: int = CACHE_BYTES, max_pixels: int = MAX_PIXELS) -> None:
        self.max_bytes, self.max_pixels = max_bytes, max_pixels
        self._cache: OrderedDict[tuple[str, int, int, int], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, path: Path, stat: os.stat_result, size: int, etag: str) -> Thumbnail:
        """The thumbnail of the file at ``path``; PhotoError if undecodable."""
        key = (str(path), stat.st_mtime_ns, stat.st_size, size)
        with self._lock:
            data = self._cache.get(key)
            if data is not None:
                self._cache.move_to_end(key)
        if data is None:
            data, _ = thumbnail_jpeg(path, size, self.max_pixels)
            self._keep(key, data)
        return Thumbnail(data, etag, stat.st_mtime)

    def _keep(self, key: tuple[str, int, int, int], data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        with self._lock:
            if key in self._cache:
                return
            self._cache[key] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, dropped = self._cache.popitem(last=False)
                self._bytes -= len(dropped)
