"""``groundsearch serve``: which gallery it starts with, and what it refuses."""

from __future__ import annotations

import shutil

from index.store import VectorStore
from service.default_gallery import ensure_gallery
from service.settings import ServiceSettings


def test_without_flickr8k_the_sample_gallery_is_built(tmp_path, parser):
    settings = ServiceSettings(
        data_dir=tmp_path / "no-data", index_dir=tmp_path / "index", cache_dir=parser.cache_dir
    )
    served = ensure_gallery(settings)
    assert "sample gallery" in served and "15 photos" in served
    assert "the gallery at" in ensure_gallery(settings)  # kept as it is the second time
    # the photos live in the rebuildable cache: cleared, they come back at the next start
    photos = parser.cache_dir / "sample-data"
    shutil.rmtree(photos)
    ensure_gallery(settings)
    assert len(list((photos / "Images").iterdir())) == 15


def test_serve_refuses_a_gallery_built_by_another_checkpoint(cli, service_gallery, tmp_path):
    index = tmp_path / "gallery"
    shutil.copytree(service_gallery, index)
    for part in ("images", "captions"):
        store = VectorStore.load(index / part)
        store.identity = {"checkpoint_sha256": "0" * 64}
        store.save(index / part)
    res = cli("serve", "--index", str(index), "--port", "8999")
    assert res.returncode == 2
    assert "was built by" in res.stderr and "rebuild" in res.stderr


def test_serve_refuses_a_short_write_token(cli, tmp_path):
    res = cli("serve", "--index", str(tmp_path), env_extra={"GROUNDSEARCH_WRITE_TOKEN": "abc"})
    assert res.returncode == 2 and "at least 16 characters" in res.stderr
