"""``groundsearch index --ray``: the gallery a local Ray cluster builds is the one the
local path builds (same photos, files, captions, vectors), bad files are named the same
way, a re-run embeds only what is new; clear errors without Ray or a cluster."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexer import IndexingError, IndexReport, index_photos
from groundsearch.model.runtime.images.ray_pool import RayClusterError
from tests.exif_photos import Exif, write_photo
from tests.index.test_indexer import CHECKPOINT, FLICKR, real_photos

PHOTOS = 40


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """40 real Flickr8k photos (links), a byte-identical copy, a truncated JPEG and a
    text file, two more as a phone's turned HEIC and AVIF and a truncated HEIC; a
    captions file with each photo's first Flickr8k caption."""
    root = tmp_path_factory.mktemp("ray-photos") / "photos"
    (root / "more").mkdir(parents=True)
    photos = real_photos(PHOTOS)
    for p in photos:
        (root / p.name).symlink_to(p)
    shutil.copy(photos[0], root / "more" / "copy.jpg")
    (root / "more" / "broken.jpg").write_bytes(photos[1].read_bytes()[:2000])
    (root / "more" / "notes.jpg").write_text("not a photo")
    more = real_photos(PHOTOS + 2)[PHOTOS:]
    for path, name, fmt, turn in (
        (more[0], "phone.heic", "HEIF", 6),
        (more[1], "phone.avif", "AVIF", 8),
    ):
        with Image.open(path) as img:
            write_photo(root / "more" / name, img, Exif(orientation=turn), fmt)
    heic = (root / "more" / "phone.heic").read_bytes()
    (root / "more" / "cut.heic").write_bytes(heic[: len(heic) // 2])
    names = {p.name for p in photos}
    first: dict[str, str] = {}
    for line in (FLICKR / "Flickr8k.token.txt").read_text().splitlines():
        key, _, text = line.partition("\t")
        first.setdefault(key.partition("#")[0], text)
    captions = root.parent / "captions.tsv"
    captions.write_text("".join(f"{n}\t{first[n]}\n" for n in sorted(names)))
    return root, captions


def summary(report: IndexReport) -> dict[str, object]:
    """The run's summary, less where the gallery is and how long it took."""
    return {k: v for k, v in report.summary().items() if k not in ("gallery", "seconds")}


def contents(gallery_dir: Path) -> dict[str, tuple[str, tuple[str, ...], np.ndarray]]:
    """sha256 → (path, captions, vector) of every photo in the gallery."""
    gallery = Gallery.open(gallery_dir)
    try:
        out = {}
        for i in gallery.image_ids():
            record = gallery.image(i)
            out[record.sha256] = (
                record.path,
                tuple(sorted(record.captions)),
                np.asarray(gallery.image_vector(i), np.float32),
            )
        return out
    finally:
        gallery.close()


@pytest.mark.slow
def test_a_local_ray_cluster_builds_the_gallery_the_local_path_builds(folder, tmp_path, parser):
    ray = pytest.importorskip("ray")
    root, captions = folder
    local = index_photos([root], tmp_path / "local", CHECKPOINT, parser, captions, workers=0)
    remote = index_photos(
        [root], tmp_path / "ray", CHECKPOINT, parser, captions, workers=2, ray="local"
    )
    assert summary(remote) == summary(local)
    assert (remote.embedded, remote.duplicates, remote.captions) == (PHOTOS + 2, 1, PHOTOS)
    assert sorted((s.path.name, s.reason) for s in remote.skipped) == [
        ("broken.jpg", "corrupt"),
        ("cut.heic", "corrupt"),
        ("notes.jpg", "not-an-image"),
    ]
    want, got = contents(tmp_path / "local"), contents(tmp_path / "ray")
    assert sorted(got) == sorted(want) and len(got) == PHOTOS + 2
    for sha, (path, texts, vector) in want.items():
        assert got[sha][:2] == (path, texts)
        # the same code on batches grouped alike: equal up to the stored precision
        np.testing.assert_allclose(got[sha][2], vector, atol=1e-3)

    # a re-run embeds nothing (and starts no cluster: nothing to embed)
    again = index_photos([root], tmp_path / "ray", CHECKPOINT, parser, captions, ray="local")
    assert (again.embedded, again.unchanged, again.captions) == (0, PHOTOS + 3, 0)
    assert again.photos == PHOTOS + 2 and not ray.is_initialized()


def test_without_ray_or_a_cluster_the_error_says_what_to_do(tmp_path, parser, monkeypatch):
    with pytest.raises(IndexingError, match="at least 1"):
        index_photos([tmp_path], tmp_path / "g", CHECKPOINT, parser, workers=0, ray="local")
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as if not installed
    with pytest.raises(RayClusterError, match=r"pip install 'groundsearch\[ray\]'"):
        index_photos([tmp_path], tmp_path / "g", CHECKPOINT, parser, ray="local")
    assert not (tmp_path / "g").exists()  # refused before the gallery was made


@pytest.mark.slow
def test_an_unreachable_cluster_is_a_clear_cli_error(cli, tmp_path):
    pytest.importorskip("ray")
    res = cli("index", str(tmp_path), "--index", str(tmp_path / "g"), "--ray", "127.0.0.1:1")
    assert res.returncode == 2, res.stderr
    assert "cannot reach the Ray cluster '127.0.0.1:1'" in res.stderr
    assert "Traceback" not in res.stderr
