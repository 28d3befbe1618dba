"""``groundsearch build-index``: a tiny Flickr8k-layout folder embedded by the shipped
SDT-RNN into image and caption stores that find each other."""

from __future__ import annotations

import json

import numpy as np
import pytest

from groundsearch.index.gallery import Gallery, checkpoint_identity
from groundsearch.index.store import IdentityMismatch, StoreError
from groundsearch.settings import get_settings
from tests.tiny_data import make_tiny_flickr


@pytest.fixture(scope="module")
def built(cli, tmp_path_factory):
    root = make_tiny_flickr(tmp_path_factory.mktemp("data") / "flickr8k", train=0, dev=0, test=6)
    out = tmp_path_factory.mktemp("gallery") / "g"
    res = cli("build-index", "--data", str(root), "--out", str(out))
    return root, out, res


def test_build_index_embeds_every_photo_and_caption(built):
    root, out, res = built
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["images"] == 6 and json.loads(res.stdout)["captions"] == 30
    gallery = Gallery.open(out, checkpoint_identity(get_settings().default_checkpoint))
    assert len(gallery.images) == 6 and len(gallery.captions) == 30
    photos = {record.file for record in gallery.image_records()}
    assert photos == set((root / "Flickr_8k.testImages.txt").read_text().split())


def test_caption_vectors_find_their_own_photo(built):
    _, out, _ = built
    gallery = Gallery.open(out)
    hits_at_1 = []
    for cid in gallery.captions.ids:
        caption = gallery.caption(cid)
        assert caption in gallery.captions_of(caption.image_id)
        best, _ = gallery.search_images(gallery.captions.vector(cid), k=1)[0]
        hits_at_1.append(best.id == caption.image_id)
    assert np.mean(hits_at_1) > 0.5  # chance is 1/6


def test_a_gallery_from_another_checkpoint_is_refused(built, tmp_path):
    _, out, _ = built
    with pytest.raises(IdentityMismatch, match="was built by"):
        Gallery.open(out, {"checkpoint_sha256": "0" * 64})
    with pytest.raises(StoreError, match="no gallery at"):
        Gallery.open(tmp_path / "nothing")


def test_build_index_bad_inputs_are_named(cli, tmp_path):
    res = cli("build-index", str(tmp_path / "missing.pt"), "--out", str(tmp_path / "g"))
    assert res.returncode == 2 and "checkpoint not found" in res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli("build-index", "--data", str(empty), "--out", str(tmp_path / "g"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
