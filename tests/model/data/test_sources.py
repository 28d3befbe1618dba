"""Captioned collections named on the command line: Flickr8k, cc-web's features, a
captions file of one's own photos."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.model.data import DatasetError
from groundsearch.model.data.sources import hash_split, load_source, parse_source
from tests.tiny_data import FLICKR, make_tiny_features, make_tiny_flickr

DATA = get_settings().data_dir


def test_named_collections_and_weights():
    flickr = parse_source("flickr8k", DATA)
    web = parse_source("cc-web=0.5", DATA)
    assert (flickr.kind, flickr.weight, str(flickr)) == ("flickr8k", 1.0, "flickr8k")
    assert (web.kind, web.weight, str(web)) == ("features", 0.5, "cc-web=0.5")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("cc-web=lots", "not a number"),
        ("cc-web=0", "positive"),
        ("cc-web=-1", "positive"),
        ("/no/such/folder", "source not found"),
    ],
)
def test_bad_sources_are_named(text, message):
    with pytest.raises(DatasetError, match=message):
        parse_source(text, DATA)


def test_cc_web_dev_comes_as_features():
    ds = load_source(parse_source("cc-web", DATA), "dev")
    assert len(ds.images) == len(ds.captions) == 1000
    assert ds.features is not None and ds.features.shape == (1000, 1280)
    assert ds.features.dtype == np.float32 and ds.backbone == "efficientnet-lite2"
    assert ds.caption_image == tuple(range(1000))
    with pytest.raises(DatasetError, match="as features, not files"):
        ds.image_path(0)
    with pytest.raises(DatasetError, match="no split 'test'"):
        load_source(parse_source("cc-web", DATA), "test")
    with pytest.raises(DatasetError, match="no features of efficientnet-lite0"):
        load_source(parse_source("cc-web", DATA), "dev", "efficientnet-lite0")


def test_a_subset_keeps_its_feature_rows(tmp_path):
    ds = load_source(parse_source(str(make_tiny_features(tmp_path / "web")), DATA), "train")
    part = ds.subset([3, 1])
    assert part.images == (ds.images[3], ds.images[1])
    assert part.captions == (ds.captions[3], ds.captions[1])
    np.testing.assert_array_equal(part.features, ds.features[[3, 1]])


def test_a_captions_file_of_ones_own_photos(tmp_path):
    root = make_tiny_flickr(tmp_path / "f", train=40, dev=0, test=0)
    names = sorted(p.name for p in (root / "Images").iterdir())
    lines = [f"Images/{n}\ta photo called {n[:6]}" for n in names] + ["gone.jpg\tno file"]
    (root / "mine.tsv").write_text("\n".join(lines) + "\n")
    source = parse_source(str(root / "mine.tsv"), DATA)
    assert source.kind == "captions" and source.name == "mine.tsv"
    every = load_source(source, None)
    assert len(every.images) == 40 and every.image_path(0).is_file()
    splits = {s: load_source(source, s).images for s in ("train", "dev", "test") if _has(source, s)}
    assert sorted(n for v in splits.values() for n in v) == sorted(every.images)
    assert all(hash_split(n) == s for s, v in splits.items() for n in v)
    assert len(splits["train"]) > len(every.images) // 2


def _has(source, split):
    try:
        load_source(source, split)
    except DatasetError:
        return False
    return True


def test_flickr8k_by_name():
    ds = load_source(parse_source("flickr8k", DATA), "dev")
    assert len(ds.images) == 1000 and ds.features is None
    assert ds.image_path(0) == FLICKR / "Images" / ds.images[0]


def test_each_photo_gets_the_feature_row_of_its_caption_line():
    """Row i of the features is the photo of line i of captions.tsv, whatever the order
    of the split lists (a sorted read once paired captions with other photos' rows)."""
    root = DATA / "cc-web"
    ds = load_source(parse_source("cc-web", DATA), "dev")
    lines = (root / "captions.tsv").read_text(encoding="utf-8").splitlines()
    line_of = {ln.split("#", 1)[0]: i for i, ln in enumerate(lines)}
    rows = np.load(root / "features" / "efficientnet-lite2.npy", mmap_mode="r")
    for i in (0, 1, 500, 999):
        np.testing.assert_array_equal(ds.features[i], rows[line_of[ds.images[i]]])
        assert lines[line_of[ds.images[i]]].split("\t", 1)[1] == ds.captions[i]
