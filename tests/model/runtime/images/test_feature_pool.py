"""FeaturePool: the same features in worker processes as in this one, bad files and
crashing decoders reported per photo, results in order, items read lazily."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from groundsearch.model.runtime.images.backbones import BackboneError
from groundsearch.model.runtime.images.backend import Outcome
from groundsearch.model.runtime.images.photos import PhotoError, decode_photo
from groundsearch.model.runtime.images.pool import FeaturePool, _run_batch
from tests.oriented import coffee, write_oriented

IMAGES = Path("/work/shared/data/flickr8k/Images")
IDENTITY = "efficientnet-lite0"


@pytest.fixture(scope="module")
def album(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Five real photos with a corrupt file, a text file, a truncated JPEG and a GIF
    among them; what each should give is in ``EXPECTED``."""
    root = tmp_path_factory.mktemp("album")
    real = sorted(IMAGES.iterdir())[:5]
    data = real[0].read_bytes()
    paths = [shutil.copyfile(src, root / src.name) for src in real]
    (root / "corrupt.jpg").write_bytes(data[:600] + bytes(range(256)) * 40)
    (root / "notes.jpg").write_text("a text file, not a photo")
    (root / "cut.jpg").write_bytes(data[: len(data) // 2])
    Image.open(real[1]).save(root / "still.gif")
    bad = [root / n for n in ("corrupt.jpg", "notes.jpg", "cut.jpg")]
    return [paths[0], bad[0], paths[1], bad[1], root / "still.gif", paths[2], bad[2], *paths[3:]]


EXPECTED = {"corrupt.jpg": "corrupt", "notes.jpg": "not-an-image", "cut.jpg": "corrupt"}


def reference(extractor, paths: list[Path]) -> dict[Path, np.ndarray]:
    """Features from ``FeatureExtractor.embed_images`` on the decodable photos."""
    good = [p for p in paths if p.name not in EXPECTED]
    images = [decode_photo(p, min_side=extractor.spec.resize)[0] for p in good]
    return dict(zip(good, extractor.embed_images(images), strict=True))


def check(
    results: list[tuple[Path, np.ndarray | PhotoError]], expected: dict[Path, np.ndarray]
) -> None:
    for path, result in results:
        if path.name in EXPECTED:
            assert isinstance(result, PhotoError), path
            assert result.reason == EXPECTED[path.name] and str(path) in str(result)
        else:
            assert isinstance(result, np.ndarray) and result.dtype == np.float32, path
            np.testing.assert_allclose(result, expected[path], rtol=1e-5, atol=1e-5)


def counted(paths: list[Path], total: int, pulled: list[int]) -> Iterator[Path]:
    """``total`` items cycling over ``paths``, counting in ``pulled[0]`` how many were read."""
    for i in range(total):
        pulled[0] = i + 1
        yield paths[i % len(paths)]


def test_in_process_pool_matches_the_extractor_and_reports_bad_files(extractor, album):
    with FeaturePool(IDENTITY, workers=0, batch_size=3) as pool:
        results = list(pool.map(album, lambda p: p))
    assert [p for p, _ in results] == album
    check(results, reference(extractor, album))
    gif = dict(results)[album[4]]
    assert isinstance(gif, np.ndarray)  # a GIF photo embeds like any other


def test_items_are_read_lazily_in_process(album):
    pulled = [0]
    with FeaturePool(IDENTITY, workers=0, batch_size=2) as pool:
        stream = pool.map(counted(album, 10**9, pulled), lambda p: p)
        first = [next(stream) for _ in range(3)]
    assert [p for p, _ in first] == album[:3]
    assert pulled[0] <= 4  # two batches of two


def test_an_unknown_backbone_fails_before_any_process_starts():
    with pytest.raises(BackboneError, match="resnet9000"):
        FeaturePool("resnet9000", workers=2)


def crash_on_marked(paths: list[str]) -> list[Outcome]:
    """The worker task, but a photo named crash* kills its process like a segfault."""
    if any(Path(p).name.startswith("crash") for p in paths):
        os.kill(os.getpid(), signal.SIGSEGV)
    return _run_batch(paths)


class CrashingPool(FeaturePool):
    task = staticmethod(crash_on_marked)


@pytest.fixture(scope="module")
def workers2() -> Iterator[FeaturePool]:
    with CrashingPool(IDENTITY, workers=2, batch_size=2) as pool:
        yield pool


@pytest.mark.slow
def test_two_workers_match_in_process_features_in_order(extractor, album, workers2):
    with FeaturePool(IDENTITY, workers=0) as local:
        here = dict(local.map(album, lambda p: p))
    results = list(workers2.map(album, lambda p: p))
    assert [p for p, _ in results] == album
    expected = reference(extractor, album)
    check(results, expected)
    for path, result in results:
        if isinstance(result, np.ndarray):
            np.testing.assert_allclose(result, here[path], rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_worker_processes_turn_every_exif_orientation_upright(workers2, tmp_path):
    """The same real photo stored with each of the 8 orientations: one feature vector
    from the spawned workers, and the same as the in-process pool's."""
    files = write_oriented(coffee(), tmp_path)
    results = dict(workers2.map(files, lambda p: p))
    with FeaturePool(IDENTITY, workers=0) as local:
        here = dict(local.map(files, lambda p: p))
    first = results[files[0]]
    assert isinstance(first, np.ndarray)
    for path in files:
        np.testing.assert_allclose(results[path], first, rtol=0, atol=1e-5, err_msg=path.name)
        np.testing.assert_allclose(here[path], first, rtol=0, atol=1e-5, err_msg=path.name)


@pytest.mark.slow
def test_a_photo_that_crashes_its_worker_is_reported_and_the_stream_goes_on(
    extractor, album, workers2, tmp_path
):
    crash = shutil.copyfile(album[0], tmp_path / "crash.jpg")
    items = [*album[:3], crash, *album[3:]]
    results = list(workers2.map(items, lambda p: p))
    assert [p for p, _ in results] == items
    error = dict(results)[crash]
    assert isinstance(error, PhotoError) and error.reason == "corrupt"
    assert str(error) == f"{crash}: the decoder crashed on this file"
    check([r for r in results if r[0] != crash], reference(extractor, album))
    # the restarted pool goes on working
    again = list(workers2.map(album[:2], lambda p: p))
    assert isinstance(again[0][1], np.ndarray)


@pytest.mark.slow
def test_items_are_read_lazily_with_workers(album, workers2):
    pulled = [0]
    stream = workers2.map(counted(album, 10**9, pulled), lambda p: p)
    first = [next(stream) for _ in range(5)]
    assert [p for p, _ in first] == album[:5]
    # at most two batches per worker ahead of the one being yielded, plus that one
    assert pulled[0] <= 2 * 2 * 2 + 2 + 2
    stream.close()
