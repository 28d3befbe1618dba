"""Photos upright: the same real photo stored with each of the 8 EXIF orientations gives
the same pixels from every decode path, the same features and the same joint-space
vector, and is served upright."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor, file_key, photo_key
from groundsearch.model.runtime.images.photos import (
    ORIENTATION,
    decode_photo,
    photo_orientation,
    upright_copy,
)
from tests.oriented import (
    ORIENTATIONS,
    SUFFIX,
    as_stored,
    coffee,
    oriented_bytes,
    write_oriented,
)

#: The shorter side the shipped checkpoint's backbone (EfficientNet-Lite2) resizes to.
MIN_SIDE = 292


def pixels(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("RGB"), dtype=np.int16)


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(1)
    return load_checkpoint(get_settings().default_checkpoint)


@pytest.fixture(scope="module")
def extractor(model, tmp_path_factory):
    return FeatureExtractor.for_identity(model.backbone, tmp_path_factory.mktemp("features"))


def test_the_stored_files_are_turned_and_tagged():
    upright = coffee()
    for orientation in ORIENTATIONS:
        with Image.open(io.BytesIO(oriented_bytes(upright, orientation))) as img:
            assert img.getexif()[ORIENTATION] == orientation
            assert img.size == (upright.size if orientation < 5 else upright.size[::-1])
            if orientation > 1:  # stored pixels differ from the upright ones
                assert img.size != upright.size or not np.array_equal(pixels(img), pixels(upright))


def test_every_orientation_decodes_to_the_same_upright_pixels(tmp_path):
    # odd sides: the whole-factor reduce drops a partial box at the right and bottom only
    # once the photo is upright, so a reduce before the turn would give other pixels
    upright = coffee((1201, 801))
    reduced = decode_photo(oriented_bytes(upright, 1), min_side=MIN_SIDE)[0]
    assert reduced.size == (601, 401)  # reduced by 2
    for path in write_oriented(upright, tmp_path):
        data = path.read_bytes()
        for source in (data, path):
            img, fmt = decode_photo(source)
            assert fmt == "PNG" and np.array_equal(pixels(img), pixels(upright)), path
            small = decode_photo(source, min_side=MIN_SIDE)[0]
            assert np.array_equal(pixels(small), pixels(reduced)), path


@pytest.mark.parametrize("fmt", ["JPEG", "WEBP", "TIFF"])
def test_other_formats_decode_upright(fmt, tmp_path):
    upright = coffee((1200, 800))
    files = write_oriented(upright, tmp_path, fmt)
    # JPEG: decoded at 1/2 scale (both sides ≥ MIN_SIDE), turned; others: turned, reduced
    first = pixels(decode_photo(files[0], min_side=MIN_SIDE)[0])
    assert first.shape[:2] == (400, 600)
    for path in files[1:]:
        got = pixels(decode_photo(path, min_side=MIN_SIDE)[0])
        assert got.shape == first.shape, path
        # lossy formats store each turned picture with its own compression error
        assert np.abs(got - first).mean() < 2.0, path
        if fmt == "TIFF":  # Pillow's TIFF reader turns a photo as it loads it, and did before
            continue
        with Image.open(path) as raw:  # what was decoded before: the stored pixels
            sideways = pixels(raw.reduce(2))
        assert sideways.shape != first.shape or np.abs(sideways - first).mean() > 20, path


def test_an_invalid_orientation_is_read_as_stored():
    upright = coffee()
    for value in (0, 9, 300):
        exif = Image.Exif()
        exif[ORIENTATION] = value
        buf = io.BytesIO()
        as_stored(upright, 6).save(buf, format="PNG", exif=exif)
        img, _ = decode_photo(buf.getvalue())
        assert np.array_equal(pixels(img), pixels(as_stored(upright, 6)))


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "WEBP", "TIFF"])
def test_the_served_copy_is_upright_in_its_own_format_without_the_tag(fmt, tmp_path):
    upright = coffee()
    files = write_oriented(upright, tmp_path, fmt)
    assert upright_copy(files[0]) is None  # upright already: the file itself is served
    for path in files[1:]:
        copy = upright_copy(path)
        assert copy is not None, path
        data, served_fmt = copy
        assert served_fmt == fmt
        with Image.open(io.BytesIO(data)) as img:  # as a client that ignores EXIF sees it
            assert img.format == fmt and img.size == upright.size
            assert img.getexif().get(ORIENTATION) is None, path
            if fmt in ("PNG", "TIFF"):
                assert np.array_equal(pixels(img), pixels(upright)), path
            else:  # one more generation of the lossy format than the decoded file
                diff = np.abs(pixels(img) - pixels(decode_photo(path)[0])).mean()
                assert diff < 1.5, (path, diff)


def test_a_photo_without_exif_or_an_animation_is_served_as_stored(tmp_path):
    plain = tmp_path / "plain.jpg"
    coffee().save(plain, quality=90)
    assert photo_orientation(plain) == 1 and upright_copy(plain) is None
    gif = tmp_path / "moving.gif"
    exif = Image.Exif()
    exif[ORIENTATION] = 6
    frames = [coffee((60, 40)), coffee((60, 40)).transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    frames[0].save(gif, save_all=True, append_images=frames[1:], exif=exif)
    assert upright_copy(gif) is None


def test_features_and_vectors_of_every_orientation_are_equal(model, extractor, tmp_path):
    upright = coffee()
    paths = write_oriented(upright, tmp_path)
    feats = extractor.embed_files(paths)
    vectors = model.embed_images(feats)
    for i in range(1, len(paths)):
        np.testing.assert_allclose(feats[i], feats[0], rtol=0, atol=1e-5)
        np.testing.assert_allclose(vectors[i], vectors[0], rtol=0, atol=1e-6)
    # the sideways pixels (what was embedded before) give another vector
    sideways = model.embed_images(extractor.embed_images([as_stored(upright, 6)]))[0]
    assert float(sideways @ vectors[0]) < 0.99 * float(vectors[0] @ vectors[0])


def test_a_stale_cache_entry_of_a_turned_photo_is_not_read(model, tmp_path):
    upright = coffee()
    paths = write_oriented(upright, tmp_path)
    assert photo_key(paths[0]) == file_key(paths[0])
    assert photo_key(paths[5]) == file_key(paths[5]) + ":o6"
    # entries as a cache filled before photos were turned upright holds them
    cache_dir = tmp_path / "cache"
    first = FeatureExtractor.for_identity(model.backbone, cache_dir)
    assert first.cache is not None
    stale = np.full(first.dim, 7.0, np.float32)
    first.cache.put_many(first.identity, [(file_key(p), stale) for p in (paths[0], paths[5])])
    feats = first.embed_files([paths[0], paths[5]])
    np.testing.assert_array_equal(feats[0], stale)  # upright: its entry is still valid
    assert not np.allclose(feats[1], stale)  # turned: computed again, upright
    fresh = first.embed_images([upright])[0]
    np.testing.assert_allclose(feats[1], fresh, rtol=0, atol=1e-5)


def test_every_suffix_is_a_format_the_service_takes():
    from groundsearch.model.runtime.images.photos import EXTENSIONS

    assert set(SUFFIX) <= set(EXTENSIONS)


def test_a_phone_jpeg_with_a_second_picture_is_a_turned_jpeg(tmp_path):
    """A camera's JPEG with another picture in it (MPO: a depth or HDR gain map) is read
    as the JPEG it is — an upload takes it — and turned upright."""
    from groundsearch.model.runtime.images.photos import EXTENSIONS

    upright = coffee()
    exif = Image.Exif()
    exif[ORIENTATION] = 6
    path = tmp_path / "phone.jpg"
    as_stored(upright, 6).save(
        path, "MPO", save_all=True, append_images=[coffee((60, 40))], exif=exif, quality=95
    )
    with Image.open(path) as img:
        assert img.format == "MPO"
    img, fmt = decode_photo(path.read_bytes(), formats=EXTENSIONS, min_side=MIN_SIDE)
    assert fmt == "JPEG" and img.size == upright.size
    assert np.abs(pixels(img) - pixels(upright)).mean() < 3
    copy = upright_copy(path)
    assert copy is not None and copy[1] == "JPEG"
