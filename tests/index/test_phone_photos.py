"""``groundsearch index`` on a phone's folder: HEIC and AVIF photos (written here by
pillow-heif and pillow-avif-plugin, with real EXIF blocks and turned as phones store
them) are embedded upright — the vector of the upright JPEG of the same pixels — with
what their files say, found by a sentence; a truncated HEIC and a text file named .heic
are each named in the summary with their reason. In this process and in spawned workers."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from groundsearch.common.settings import get_settings
from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexer import index_photos
from groundsearch.index.ingest.sample_gallery import skimage_data_dir
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.sentences import Sentences
from tests.exif_photos import Exif, photo_bytes, write_photo
from tests.index.synthetic import search_images
from tests.oriented import as_stored, oriented_bytes

CHECKPOINT = get_settings().default_checkpoint
#: An iPhone's HEIC: turned (orientation 6), dated with its offset, placed.
IPHONE = Exif(
    original="2024:07:01 18:03:05",
    offset="+02:00",
    make="Apple",
    model="iPhone 15 Pro",
    orientation=6,
    lat=48.8583,
    lon=2.2945,
)
#: An Android phone's AVIF: turned the other way, no offset, no GPS.
ANDROID = Exif(original="2025:01:02 03:04:05", make="Google", model="Pixel 8", orientation=8)


def sample(name: str) -> Image.Image:
    with Image.open(skimage_data_dir() / name) as img:
        return img.convert("RGB")


@pytest.fixture(scope="module")
def phone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The coffee photo three ways (an upright JPEG, a turned HEIC, a turned AVIF), the
    camera man as an AVIF, two more photos, a truncated HEIC and a text file .heic."""
    root = tmp_path_factory.mktemp("phone") / "DCIM"
    coffee = sample("coffee.png")
    root.mkdir(parents=True)
    (root / "coffee.jpg").write_bytes(oriented_bytes(coffee, 1, "JPEG"))  # quality 95
    write_photo(root / "100APPLE" / "IMG_0001.heic", coffee, IPHONE, "HEIF")
    write_photo(root / "Camera" / "PXL_0002.avif", coffee, ANDROID, "AVIF")
    write_photo(root / "Camera" / "PXL_0003.avif", sample("camera.png"), fmt="AVIF")
    write_photo(root / "brick.jpg", sample("brick.png"))
    write_photo(root / "chelsea.jpg", sample("chelsea.png"))
    cut = photo_bytes(sample("astronaut.png"), IPHONE, "HEIF")
    (root / "100APPLE" / "IMG_0004.heic").write_bytes(cut[: len(cut) // 2])
    (root / "100APPLE" / "IMG_0005.heic").write_text("not a photo, whatever its name says\n")
    return root


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def by_name(gallery_dir: Path) -> dict[str, tuple]:
    """file name → (record, vector) of every photo."""
    gallery = Gallery.open(gallery_dir)
    try:
        return {
            gallery.image(i).file: (gallery.image(i), gallery.image_vector(i))
            for i in gallery.image_ids()
        }
    finally:
        gallery.close()


def test_heic_and_avif_are_indexed_upright_with_their_metadata_and_found(phone, tmp_path, parser):
    report = index_photos([phone], tmp_path / "g", CHECKPOINT, parser, workers=0)
    assert (report.embedded, report.photos) == (6, 6)
    skipped = {s.path.name: (s.reason, s.message) for s in report.skipped}
    assert set(skipped) == {"IMG_0004.heic", "IMG_0005.heic"}
    reason, message = skipped["IMG_0004.heic"]
    assert reason == "corrupt" and "the HEIC/HEIF image is truncated or corrupt" in message
    assert skipped["IMG_0005.heic"][0] == "not-an-image"
    assert f"skipped: (corrupt) {phone / '100APPLE' / 'IMG_0004.heic'}: the HEIC" in "\n".join(
        report.lines()
    )
    assert report.summary()["skipped"] == {"corrupt": 1, "not-an-image": 1}

    photos = by_name(tmp_path / "g")
    jpg = photos["coffee.jpg"][1]
    model = load_checkpoint(CHECKPOINT)
    extractor = FeatureExtractor.for_identity(model.backbone)
    sideways = model.embed_images(extractor.embed_images([as_stored(sample("coffee.png"), 6)]))
    for name in ("IMG_0001.heic", "PXL_0002.avif"):  # upright: the JPEG's vector
        vector = photos[name][1]
        assert cosine(vector, jpg) > 0.995, name
        assert cosine(vector, sideways[0]) < 0.9, name  # not the stored pixels'

    heic, avif = photos["IMG_0001.heic"][0].meta, photos["PXL_0002.avif"][0].meta
    width, height = sample("coffee.png").size
    assert (heic.taken, heic.taken_source, heic.camera) == (
        "2024-07-01T18:03:05+02:00",
        "exif",
        "Apple iPhone 15 Pro",
    )
    assert heic.taken_at == datetime(2024, 7, 1, 16, 3, 5, tzinfo=UTC).timestamp()
    assert heic.place == (pytest.approx(48.8583, abs=1e-6), pytest.approx(2.2945, abs=1e-6))
    assert (heic.width, heic.height, heic.folder, heic.name) == (
        width,
        height,
        str(phone / "100APPLE"),
        "IMG_0001.heic",
    )
    assert (avif.taken, avif.camera, avif.place, avif.width, avif.height) == (
        "2025-01-02T03:04:05",
        "Google Pixel 8",
        None,
        width,
        height,
    )

    # found by a sentence: the three coffees first, the camera man's AVIF first for his
    door = Sentences(model, parser.parse)
    gallery = Gallery.open(tmp_path / "g")
    try:

        def best(text: str, k: int) -> set[str]:
            vector = np.asarray(door.vectors([text])[0], dtype=np.float32)
            return {h.record.file for h in search_images(gallery, vector, k)}

        assert best("A cup of coffee on a table .", 3) == {
            "coffee.jpg",
            "IMG_0001.heic",
            "PXL_0002.avif",
        }
        assert best("a man filming with a camera on a tripod", 1) == {"PXL_0003.avif"}
    finally:
        gallery.close()

    # a second run reads nothing again and names the same two files
    again = index_photos([phone], tmp_path / "g", CHECKPOINT, parser, workers=0)
    assert (again.embedded, again.unchanged) == (0, 6)
    assert {s.path.name for s in again.skipped} == {"IMG_0004.heic", "IMG_0005.heic"}


@pytest.mark.slow
def test_spawned_workers_read_them_the_same(phone, tmp_path, parser):
    """The process pool's spawned workers register the plugins themselves."""
    here = index_photos([phone], tmp_path / "here", CHECKPOINT, parser, workers=0)
    pool = index_photos([phone], tmp_path / "pool", CHECKPOINT, parser, workers=2)
    assert pool.summary()["skipped"] == here.summary()["skipped"]
    assert pool.embedded == here.embedded == 6
    want, got = by_name(tmp_path / "here"), by_name(tmp_path / "pool")
    assert set(got) == set(want)
    for name, (_, vector) in want.items():
        np.testing.assert_allclose(got[name][1], vector, rtol=0, atol=1e-5, err_msg=name)
