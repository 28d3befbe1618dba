"""``groundsearch index``: a user's messy folder into a gallery, resumable, deduplicated,
every bad file named; the CLI's errors for bad input."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from PIL import Image

from groundsearch.common.settings import get_settings
from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest import indexer
from groundsearch.index.ingest.indexer import IndexingError, index_photos
from groundsearch.index.store.photo_metadata import PhotoMetadata
from groundsearch.index.store.records import Records
from groundsearch.model.data.caption_files import CaptionFile
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.sentences import ADVICE
from tests.exif_photos import Exif, write_photo
from tests.index.format2 import downgrade
from tests.oriented import coffee, write_oriented

FLICKR = get_settings().flickr8k_dir
CHECKPOINT = get_settings().default_checkpoint


def real_photos(n: int) -> list[Path]:
    names = sorted((FLICKR / "Flickr_8k.testImages.txt").read_text().split())[:n]
    return [FLICKR / "Images" / name for name in names]


@pytest.fixture
def messy(tmp_path) -> Path:
    """Six real photos in five formats, a duplicate, a truncated JPEG, a text file, a
    hidden file and a symlink loop, in nested folders."""
    root = tmp_path / "photos"
    (root / "trip" / "day2").mkdir(parents=True)
    photos = real_photos(6)
    shutil.copy(photos[0], root / "a.jpg")
    shutil.copy(photos[1], root / "trip" / "b.jpg")
    Image.open(photos[2]).save(root / "trip" / "c.png")
    Image.open(photos[3]).save(root / "trip" / "day2" / "d.webp")
    Image.open(photos[4]).convert("P").save(root / "e.gif")
    Image.open(photos[5]).save(root / "trip" / "f.tiff")
    shutil.copy(photos[0], root / "trip" / "day2" / "a-copy.jpg")
    (root / "broken.jpg").write_bytes(photos[1].read_bytes()[:2000])
    (root / "notes.txt").write_text("not a photo")
    (root / ".DS_Store").write_bytes(b"\0\0")
    (root / "trip" / "loop").symlink_to(root)
    return root


def run(paths, gallery, parser, **kwargs) -> indexer.IndexReport:
    return index_photos(paths, gallery, CHECKPOINT, parser, workers=0, **kwargs)


def test_a_messy_folder_is_indexed_once_and_every_bad_file_named(messy, tmp_path, parser):
    captions = tmp_path / "captions.tsv"
    captions.write_text(
        "a.jpg\tA dog runs through the snow .\n"
        "trip/c.png\tA child  plays in the  water .\n"  # kept: spaces are normalised
        "this line has no tab\n"
        "missing.jpg\tA photo nobody has .\n"
    )
    gallery_dir = tmp_path / "gallery"
    report = run([messy], gallery_dir, parser, captions=captions)
    assert report.embedded == 6 and report.duplicates == 1 and report.photos == 6
    assert {s.reason for s in report.skipped} == {"corrupt", "not-an-image", "symlink-loop"}
    assert {s.path.name for s in report.skipped} == {"broken.jpg", "notes.txt", "loop"}
    assert report.captions == 2 and report.unused_captions == 1
    assert any("no tab" in p for p in report.caption_problems)
    gallery = Gallery.open(gallery_dir)
    files = sorted(gallery.image(i).file for i in gallery.image_ids())
    assert files == ["a.jpg", "b.jpg", "c.png", "d.webp", "e.gif", "f.tiff"]
    a = next(i for i in gallery.image_ids() if gallery.image(i).file == "a.jpg")
    assert gallery.image(a).captions == ("A dog runs through the snow .",)
    gallery.close()

    # a second run reads nothing new; a changed, a new and a deleted file are noticed
    again = run([messy], gallery_dir, parser, captions=captions)
    assert (again.embedded, again.unchanged, again.captions) == (0, 7, 0)
    Image.open(messy / "trip" / "c.png").rotate(90).save(messy / "trip" / "c.png")
    shutil.copy(real_photos(7)[6], messy / "g.jpg")
    os.unlink(messy / "trip" / "b.jpg")
    third = run([messy], gallery_dir, parser, captions=captions)
    # c changed (its old photo replaced), g new, b gone
    assert (third.embedded, third.replaced, third.forgotten, third.photos) == (2, 1, 1, 6)
    gallery = Gallery.open(gallery_dir)
    assert sorted(gallery.image(i).file for i in gallery.image_ids()) == [
        "a.jpg",
        "c.png",
        "d.webp",
        "e.gif",
        "f.tiff",
        "g.jpg",
    ]
    gallery.close()


def test_a_photo_deleted_while_indexing_is_skipped(messy, tmp_path, parser, monkeypatch):
    walk = indexer.walk_photos

    def walk_and_delete(paths, exclude):  # each photo vanishes right after it is found
        for item in walk(paths, exclude):
            if isinstance(item, indexer.PhotoFile) and item.path.name == "b.jpg":
                os.unlink(item.path)
            yield item

    monkeypatch.setattr(indexer, "walk_photos", walk_and_delete)
    report = run([messy], tmp_path / "g", parser)
    gone = [s for s in report.skipped if s.path.name == "b.jpg"]
    assert len(gone) == 1 and gone[0].reason in {"unreadable", "missing"}
    assert report.photos == 5


def test_a_photo_in_any_exif_orientation_gets_the_same_vector(tmp_path, parser):
    """The same real photo stored with each of the 8 orientations (PNG: lossless, so the
    upright pixels are identical; JPEG: each turned picture compressed on its own)."""
    root = tmp_path / "phone"
    files = write_oriented(coffee(), root / "png") + write_oriented(coffee(), root / "jpg", "JPEG")
    report = run([root], tmp_path / "g", parser)
    assert report.embedded == 16 and report.skipped == []
    gallery = Gallery.open(tmp_path / "g")
    by_path = {gallery.image(i).path: gallery.image_vector(i) for i in gallery.image_ids()}
    class_ids, probs = gallery.image_classes(gallery.image_ids())
    gallery.close()
    # each photo is stored with the classifier's top classes, the same for every turn
    assert class_ids.shape == (16, 10) and (class_ids >= 0).all()
    assert len(set(class_ids[:, 0].tolist())) == 1 and np.all(np.diff(probs, axis=1) <= 0)
    png = [by_path[str(p)] for p in files[:8]]
    jpg = [by_path[str(p)] for p in files[8:]]
    for vector in png[1:]:
        np.testing.assert_allclose(vector, png[0], rtol=0, atol=1e-6)
    for vector in jpg[1:]:  # JPEG's own error only
        assert float(vector @ jpg[0]) > 0.995 * float(jpg[0] @ jpg[0])


def test_nothing_to_index_leaves_a_usable_gallery(tmp_path, parser):
    empty = tmp_path / "empty"
    empty.mkdir()
    report = run([empty], tmp_path / "g", parser)
    assert (report.found, report.photos, report.skipped) == (0, 0, [])
    texts = tmp_path / "texts"
    texts.mkdir()
    for i in range(3):
        (texts / f"{i}.jpg").write_text("not really a jpeg")
    report = run([texts], tmp_path / "g", parser)
    assert [s.reason for s in report.skipped] == ["not-an-image"] * 3
    gallery = Gallery.open(tmp_path / "g")
    assert gallery.counts() == {"images": 0, "captions": 0}
    gallery.close()
    with pytest.raises(IndexingError, match="no such file or folder"):
        run([tmp_path / "nowhere"], tmp_path / "g", parser)


def test_index_cli_reports_and_refuses_clearly(cli, messy, tmp_path):
    gallery = tmp_path / "gallery"
    res = cli("index", str(messy), "--index", str(gallery), "--quiet", "--workers", "1")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["photos_embedded"] == 6 and summary["skipped"] == {
        "corrupt": 1,
        "not-an-image": 1,
        "symlink-loop": 1,
    }
    assert "broken.jpg" in res.stderr and "Traceback" not in res.stderr
    for args, message in [
        ([str(tmp_path / "nowhere")], "no such file or folder"),
        ([], "name the photo folders"),
        ([str(messy), "--captions", str(tmp_path / "none.tsv")], "none.tsv"),
        ([str(messy), "--workers", "-1"], "must be 0 or more"),
        ([str(messy), "--checkpoint", str(tmp_path / "x.pt")], "x.pt"),
        ([str(messy), "--only", str(tmp_path / "split.txt")], "split.txt"),
        ([str(messy), "--migrate"], "--migrate only moves"),
        (["--migrate"], "no gallery in the old format"),
    ]:
        res = cli("index", *args, "--index", str(gallery), "--quiet")
        assert res.returncode == 2, (args, res.stderr)
        assert message in res.stderr and "Traceback" not in res.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli("index", str(empty), "--index", str(tmp_path / "g2"), "--quiet")
    assert res.returncode == 0 and "no photo files found" in res.stderr


def test_each_unusable_caption_is_named_with_its_reason(tmp_path, parser):
    model = load_checkpoint(CHECKPOINT, parser=parser.version)
    texts = ["A dog runs through the snow .", "qzxv wpqk", "...", "a" * 2001]
    file = CaptionFile(tmp_path / "c.tsv", {"a.jpg": texts[:2], "b.jpg": texts[2:]}, [])
    report = indexer.IndexReport("g")
    trees = indexer.parse_captions(file, parser, model, 1, report)
    assert list(trees) == ["A dog runs through the snow ."]
    no_words = f"caption has no word the model knows: {ADVICE}"
    assert report.caption_problems == [
        f"{file.path}: '...': {no_words}",
        f"{file.path}: {'a' * 60!r}: caption is 2001 characters long; the limit is 2000",
        f"{file.path}: 'qzxv wpqk': {no_words}",
    ]


# --- what the files say ---------------------------------------------------------------------

#: 2024-07-01 18:03:05 at UTC+2; a Canon without an offset; GPS in the south-west.
PHONE = Exif(
    original="2024:07:01 18:03:05",
    offset="+02:00",
    make="Apple",
    model="iPhone 12",
    orientation=6,
    lat=48.8583,
    lon=2.2945,
)
CANON = Exif(
    original="2019:12:31 23:59:59", make="Canon", model="Canon EOS R5", lat=-22.9, lon=-43.2
)
MTIME = datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC).timestamp()


@pytest.fixture
def shots(tmp_path) -> Path:
    """Real photos with real EXIF blocks (a phone's, turned; a camera's without an
    offset), one without EXIF dated by its file, and a copy of the phone's elsewhere."""
    root = tmp_path / "shots"
    photos = [Image.open(p) for p in real_photos(3)]
    write_photo(root / "2024" / "phone.jpg", photos[0], PHONE)
    write_photo(root / "2019" / "canon.jpg", photos[1], CANON)
    write_photo(root / "plain.jpg", photos[2])
    os.utime(root / "plain.jpg", (MTIME, MTIME))
    (root / "copies").mkdir()
    shutil.copy2(root / "2024" / "phone.jpg", root / "copies" / "phone-copy.jpg")
    return root


def stored_metadata(gallery_dir: Path) -> dict[str, tuple[PhotoMetadata, bytes]]:
    """Each photo's metadata and vector bytes, by file name."""
    gallery = Gallery.open(gallery_dir)
    try:
        return {
            gallery.image(i).file: (gallery.image(i).meta, gallery.image_vector(i).tobytes())
            for i in gallery.image_ids()
        }
    finally:
        gallery.close()


def test_each_photo_is_stored_with_what_its_file_says(shots, tmp_path, parser):
    report = run([shots], tmp_path / "g", parser)
    assert (report.embedded, report.duplicates, report.backfilled) == (3, 1, 0)
    stored = {name: meta for name, (meta, _) in stored_metadata(tmp_path / "g").items()}
    assert set(stored) == {"phone.jpg", "canon.jpg", "plain.jpg"}  # the copy: the same photo
    phone, canon, plain = stored["phone.jpg"], stored["canon.jpg"], stored["plain.jpg"]
    width, height = Image.open(real_photos(1)[0]).size
    assert phone == PhotoMetadata(
        taken_at=datetime(2024, 7, 1, 16, 3, 5, tzinfo=UTC).timestamp(),
        taken="2024-07-01T18:03:05+02:00",
        taken_source="exif",
        camera="Apple iPhone 12",
        lat=pytest.approx(48.8583, abs=1e-6),
        lon=pytest.approx(2.2945, abs=1e-6),
        width=width,  # stored turned, shown upright
        height=height,
        folder=str(shots / "2024"),
        name="phone.jpg",
    )
    assert (canon.taken, canon.taken_source, canon.camera) == (
        "2019-12-31T23:59:59",
        "exif",
        "Canon EOS R5",
    )
    assert canon.taken_at == datetime(2019, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
    assert canon.place == (pytest.approx(-22.9, abs=1e-6), pytest.approx(-43.2, abs=1e-6))
    assert (plain.taken, plain.taken_source, plain.taken_at) == (
        "2021-03-04T05:06:07+00:00",
        "file",
        MTIME,
    )
    assert (plain.camera, plain.place, plain.folder) == (None, None, str(shots))


class CountingPool(indexer.FeaturePool):
    """The real CNN pool, counting the photos sent to it."""

    sent: ClassVar[list[Path]] = []

    def map(self, items, path_of):
        def counted():
            for item in items:
                CountingPool.sent.append(path_of(item))
                yield item

        return super().map(counted(), path_of)


def test_a_format2_gallery_migrates_and_a_rerun_backfills_without_embedding(
    shots, tmp_path, parser, monkeypatch
):
    gallery_dir = tmp_path / "g"
    run([shots], gallery_dir, parser)
    first = stored_metadata(gallery_dir)
    downgrade(gallery_dir)  # the same records, as format 2 wrote them
    migrated = stored_metadata(gallery_dir)  # a writer's open migrates in place
    assert {n: v for n, (_, v) in migrated.items()} == {n: v for n, (_, v) in first.items()}
    assert {m for m, _ in migrated.values()} == {PhotoMetadata()}  # not read yet
    records = Records.open(gallery_dir / "gallery.db")
    assert records.meta["format"] == 3
    records.close()

    CountingPool.sent = []
    monkeypatch.setattr(indexer, "FeaturePool", CountingPool)
    report = run([shots], gallery_dir, parser)
    # format 2 kept no classes: each photo goes through the CNN for them alone
    assert len(CountingPool.sent) == 3 and report.embedded == 0  # 3 photos, 4 files
    assert (report.unchanged, report.backfilled, report.classes_backfilled) == (4, 3, 3)
    assert stored_metadata(gallery_dir) == first  # every vector byte-identical, every field
    gallery = Gallery.open(gallery_dir)
    class_ids, _ = gallery.image_classes(gallery.image_ids())
    assert len(class_ids) == 3 and (class_ids >= 0).all()
    gallery.close()
    CountingPool.sent = []
    again = run([shots], gallery_dir, parser)
    assert CountingPool.sent == []  # nothing went to the CNN
    assert (again.backfilled, again.embedded, again.classes_backfilled) == (0, 0, 0)
