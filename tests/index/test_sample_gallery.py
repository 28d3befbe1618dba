"""The shipped sample gallery: scikit-image's photos with our captions, embedded by the
shipped SDT-RNN, answer plain queries without Flickr8k."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.defaults import index_preset, sample_preset
from groundsearch.index.ingest.sample_gallery import (
    SAMPLE_CAPTIONS,
    prepare_sample_dataset,
    sample_photos,
    skimage_data_dir,
)
from groundsearch.index.store import records
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.images.photos import decode_photo
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain
from tests.index.synthetic import search_images


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Gallery, Path]:
    """The sample gallery indexed (``groundsearch index --sample``'s path) from a cold
    parse cache in a temp folder."""
    cache = tmp_path_factory.mktemp("sample-cache")
    (cache / "glove6b50d.pretrain.pt").symlink_to(ensure_pretrain(get_settings().cache_dir))
    out = tmp_path_factory.mktemp("sample-gallery") / "g"
    settings = get_settings()
    parser = Parser(settings.parser_dir, cache)
    index_preset(sample_preset(cache), out, settings.default_checkpoint, parser)
    return Gallery.open(out, checkpoint_identity(settings.default_checkpoint)), out


@pytest.fixture(scope="module")
def model(parser):
    return load_checkpoint(get_settings().default_checkpoint, parser=parser.version)


def test_captions_parse_and_name_photos_in_the_wheel(tmp_path):
    lines = SAMPLE_CAPTIONS.read_text(encoding="utf-8").splitlines()
    photos = sample_photos()
    assert 15 <= len(photos) <= 20
    assert all((skimage_data_dir() / name).is_file() for name in photos)
    root = prepare_sample_dataset(tmp_path / "sample")
    ds = load_captioned_images(root)
    assert sorted(ds.images) == photos and len(ds.captions) == len(lines)
    for i in range(len(ds.images)):
        assert 3 <= len(ds.captions_of(i)) <= 5
        assert decode_photo(ds.image_path(i))[0].mode == "RGB"


def test_prepare_is_idempotent_and_converts_to_rgb(tmp_path):
    root = prepare_sample_dataset(tmp_path / "sample")
    stamps = {p.name: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    assert prepare_sample_dataset(tmp_path / "sample") == root
    assert {p.name: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == stamps
    from PIL import Image

    for name in ("horse.png", "camera.png", "chelsea.png"):  # RGBA, L and RGB originals
        with Image.open(root / "Images" / name) as img:
            assert img.mode == "RGB"
    assert (root / "Images" / "chelsea.png").read_bytes() == (
        skimage_data_dir() / "chelsea.png"
    ).read_bytes()


def test_gallery_holds_every_photo_and_caption(built):
    gallery, out = built
    lines = SAMPLE_CAPTIONS.read_text(encoding="utf-8").splitlines()
    assert gallery.counts() == {"images": len(sample_photos()), "captions": len(lines)}
    reloaded = Gallery.open(out, checkpoint_identity(get_settings().default_checkpoint))
    assert reloaded.counts() == gallery.counts()
    for i in reloaded.image_ids():
        assert reloaded.photo_path(i).is_file()
    reloaded.close(snapshot=False)


def test_captions_find_their_own_photo_above_chance(built):
    gallery, _ = built
    hits = []
    for image_id in gallery.image_ids():
        for caption in gallery.captions_of(image_id):
            vector = records.vector(gallery.records.reader(), "captions", caption.id)
            best = search_images(gallery, vector, k=1)[0].record
            hits.append(best.id == image_id)
    assert np.mean(hits) >= 2 / len(gallery.image_ids())  # twice chance (measured: 11/50)


@pytest.mark.parametrize(
    ("query", "photo", "k"),
    [
        ("A cup of coffee on a table .", "coffee.png", 1),
        ("a man filming with a camera on a tripod", "camera.png", 1),
        ("a brick wall", "brick.png", 1),
        ("A cat .", "chelsea.png", 3),  # measured: 2nd, after the coins
        ("A rocket on a launch pad .", "rocket.jpg", 3),  # measured: 2nd, after Hubble
    ],
)
def test_plain_queries_find_the_right_photo(built, model, parser, query, photo, k):
    gallery, _ = built
    y = model.embed_sentences(parser.parse([query]))
    hits = search_images(gallery, np.asarray(y, dtype=np.float32)[0], k=k)
    assert photo in [h.record.file for h in hits]


def test_index_sample_cli(cli, tmp_path):
    out = tmp_path / "g"
    res = cli("index", "--sample", "--index", str(out), "--quiet")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["gallery_photos"] == len(sample_photos()) and summary["gallery"] == str(out)
    assert (out / "gallery.db").is_file() and (out / "index" / "images.json").is_file()
    res = cli("index", "--sample", str(tmp_path), "--index", str(out))
    assert res.returncode == 2 and "not both" in res.stderr
