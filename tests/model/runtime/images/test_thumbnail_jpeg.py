"""Photos as small JPEGs (``photos.thumbnail_jpeg``): upright, inside their box, never
enlarged."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from groundsearch.model.runtime.images.photos import PhotoError, thumbnail_jpeg
from tests.exif_photos import Exif, photo_bytes


def photo(path, seed: int, size=(640, 480)):
    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), np.uint8)
    Image.fromarray(pixels).save(path, quality=90)
    return path


def test_a_thumbnail_fits_its_box_and_is_never_enlarged(tmp_path):
    data, size = thumbnail_jpeg(photo(tmp_path / "a.jpg", 0), 100)
    img = Image.open(io.BytesIO(data))
    assert img.format == "JPEG" and img.size == size == (100, 75)
    _, small = thumbnail_jpeg(photo(tmp_path / "b.jpg", 1, (60, 90)), 100)
    assert small == (60, 90)
    with pytest.raises(PhotoError):
        thumbnail_jpeg(b"not a photo", 100)
    with pytest.raises(ValueError):
        thumbnail_jpeg(tmp_path / "a.jpg", 0)


def test_a_thumbnail_is_upright():
    upright = Image.new("RGB", (300, 200), (200, 40, 40))
    upright.paste((40, 40, 200), (0, 0, 150, 200))  # blue on the left
    data, size = thumbnail_jpeg(photo_bytes(upright, Exif(orientation=6)), 150)
    img = Image.open(io.BytesIO(data)).convert("RGB")
    assert size == (150, 100)
    left, right = img.getpixel((20, 50)), img.getpixel((130, 50))
    assert left[2] > 150 > left[0] and right[0] > 150 > right[2]
