"""Image features from the EfficientNet-Lite0 ImageNet weights, on real Flickr8k photos."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.images.backbones import (
    BackboneError,
    classifier,
    get_spec,
    preprocess,
)
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.images.photos import PhotoError, decode_photo

FLICKR = get_settings().data_dir / "flickr8k"


@pytest.fixture(scope="module")
def photos():
    ds = load_captioned_images(FLICKR, split="test")
    return ds, [ds.image_path(i) for i in range(6)]


@pytest.fixture(scope="module")
def extractor(tmp_path_factory):
    torch.set_num_threads(1)
    return FeatureExtractor(cache_dir=tmp_path_factory.mktemp("features"))


def test_classifier_sees_a_dog_in_a_dog_photo(photos):
    ds, paths = photos
    assert "dog" in ds.captions[0].lower()
    x = preprocess(get_spec("efficientnet-lite0"))(decode_photo(paths[0])[0])[None]
    with torch.no_grad():
        top5 = classifier()(x).topk(5).indices[0].tolist()
    assert any(151 <= c <= 268 for c in top5), top5  # ImageNet's dog classes


def test_features_are_cached_and_identical(photos, tmp_path):
    _, paths = photos
    first = FeatureExtractor(cache_dir=tmp_path).embed_files(paths[:3])
    assert first.shape == (3, 1280) and first.dtype == np.float32
    again = FeatureExtractor(cache_dir=tmp_path)
    again.net = None  # a cache hit must not run the network
    np.testing.assert_array_equal(again.embed_files(paths[:3]), first)


def test_different_photos_have_different_features(extractor, photos):
    _, paths = photos
    z = extractor.embed_files(paths)
    z = z / np.linalg.norm(z, axis=1, keepdims=True)
    sim = z @ z.T
    np.fill_diagonal(sim, -1)
    assert sim.max() < 0.999  # different photos, different features


def test_ten_crop_is_close_to_centre_crop(photos):
    _, paths = photos
    img, _ = decode_photo(paths[0])
    one = FeatureExtractor().embed_images([img])[0]
    ten = FeatureExtractor(ten_crop=True).embed_images([img])[0]
    cos = one @ ten / np.linalg.norm(one) / np.linalg.norm(ten)
    assert 0.8 < cos < 1.0


def test_unreadable_files_are_named(tmp_path):
    text = tmp_path / "notes.jpg"
    text.write_text("not an image")
    with pytest.raises(PhotoError, match=r"notes\.jpg: not an image") as err:
        decode_photo(text)
    assert err.value.reason == "not-an-image"
    src = (FLICKR / "Images").iterdir().__next__().read_bytes()
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(src[: len(src) // 3])
    with pytest.raises(PhotoError, match=r"cut\.jpg: the image is truncated"):
        decode_photo(cut)
    with pytest.raises(PhotoError, match="file not found"):
        decode_photo(tmp_path / "missing.jpg")


def test_decompression_bomb_is_refused(tmp_path):
    path = tmp_path / "big.png"
    Image.new("RGB", (20, 20)).save(path)
    with pytest.raises(PhotoError, match="over the 100-pixel limit") as err:
        decode_photo(path, max_pixels=100)
    assert err.value.reason == "too-large"
    with pytest.raises(PhotoError, match="unsupported image format PNG"):
        decode_photo(path.read_bytes(), formats={"JPEG"})


def test_unknown_backbone_is_named():
    with pytest.raises(BackboneError, match="unknown backbone 'resnet9000'"):
        get_spec("resnet9000")


def test_large_jpegs_decode_at_reduced_scale(tmp_path):
    src = next((FLICKR / "Images").iterdir())
    big = tmp_path / "big.jpg"
    Image.open(src).convert("RGB").resize((2000, 1600)).save(big, quality=90)
    assert decode_photo(big)[0].size == (2000, 1600)
    small, fmt = decode_photo(big, min_side=256)
    assert (small.size, small.mode, fmt) == ((500, 400), "RGB", "JPEG")  # 1/4: both ≥ 256
    assert decode_photo(big, min_side=450)[0].size == (1000, 800)  # 1/4 is 400 < 450
    assert decode_photo(big, min_side=1600)[0].size == (2000, 1600)
    with pytest.raises(PhotoError, match="2000×1600 pixels") as err:  # the full size counts
        decode_photo(big, max_pixels=2000 * 1600 - 1, min_side=256)
    assert err.value.reason == "too-large"
    png = tmp_path / "big.png"
    Image.open(big).save(png)
    # other formats: decoded whole, then box-reduced by a whole factor (6: both ≥ 256)
    assert decode_photo(png, min_side=256)[0].size == (334, 267)  # rounded up
    assert decode_photo(png)[0].size == (2000, 1600)
    pal = tmp_path / "palette.gif"
    Image.open(big).convert("P").save(pal)  # a mode reduce() does not take
    reduced, fmt = decode_photo(pal, min_side=500)
    assert (reduced.size, reduced.mode, fmt) == ((667, 534), "RGB", "GIF")


def test_a_decompression_bomb_is_refused_in_our_words(tmp_path):
    bomb = tmp_path / "huge.png"
    Image.new("1", (10_000, 10_000)).save(bomb)  # 100 MP: over Pillow's own bomb threshold
    with pytest.raises(PhotoError) as err:
        decode_photo(bomb)
    assert err.value.reason == "too-large"
    message = str(err.value).removeprefix(f"{bomb}: ")
    assert message == "image has more pixels than the 40,000,000-pixel limit"


def test_other_formats_decode_and_an_animation_gives_its_first_frame(tmp_path):
    src = next((FLICKR / "Images").iterdir())
    photo = decode_photo(src)[0]
    pixels = np.asarray(photo, np.float32)
    for fmt, ext, tolerance in [("TIFF", "tif", 0), ("BMP", "bmp", 0), ("WEBP", "webp", 8)]:
        path = tmp_path / f"photo.{ext}"
        photo.save(path, fmt)
        img, got = decode_photo(path, min_side=256)
        assert (got, img.mode, img.size) == (fmt, "RGB", photo.size)
        assert np.abs(np.asarray(img, np.float32) - pixels).mean() <= tolerance
    first = photo.quantize(256)
    black = Image.new("RGB", photo.size).quantize(256)
    gif = tmp_path / "moving.gif"
    first.save(gif, save_all=True, append_images=[black], duration=100, loop=0)
    assert Image.open(gif).n_frames == 2
    img, fmt = decode_photo(gif)
    assert (fmt, img.mode) == ("GIF", "RGB")
    np.testing.assert_array_equal(np.asarray(img), np.asarray(first.convert("RGB")))
