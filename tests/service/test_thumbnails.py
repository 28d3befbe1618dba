"""Thumbnails kept in memory: made once, bounded in bytes, remade when the file changes."""

from __future__ import annotations

import os

import numpy as np
from PIL import Image

from groundsearch.model.runtime.images.photos import thumbnail_jpeg
from groundsearch.service.core.thumbnails import Thumbnails, thumbnail_etag


def photo(path, seed: int, size=(640, 480)):
    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), np.uint8)
    Image.fromarray(pixels).save(path, quality=90)
    return path


def test_the_cache_keeps_recent_thumbnails_within_its_bound_and_follows_the_file(tmp_path):
    paths = [photo(tmp_path / f"{i}.jpg", i) for i in range(6)]
    one = len(thumbnail_jpeg(paths[0], 128)[0])
    cache = Thumbnails(max_bytes=int(one * 3.5))
    made = {}
    for p in paths:
        stat = p.stat()
        made[p] = cache.get(p, stat, 128, thumbnail_etag("sha", stat, 128))
        assert sum(map(len, cache._cache.values())) <= cache.max_bytes
    assert len(cache._cache) == 3  # the three most recent
    again = cache.get(paths[-1], paths[-1].stat(), 128, "x")
    assert again.data == made[paths[-1]].data
    # the file changes (new bytes, new time): a new thumbnail and a new tag
    photo(paths[-1], 99)
    os.utime(paths[-1], (1e9, 1e9))
    stat = paths[-1].stat()
    changed = cache.get(paths[-1], stat, 128, thumbnail_etag("sha", stat, 128))
    assert changed.data != made[paths[-1]].data and changed.etag != made[paths[-1]].etag
