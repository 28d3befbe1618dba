"""A gallery's public verbs, with synthetic vectors: an upload and its captions in one
write, stored once; reads; opening refuses other models, old formats and missing
galleries, and clears the leftovers of interrupted writes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from groundsearch.index.errors import IdentityMismatch, StoreError, UnknownItemError
from groundsearch.index.gallery import Gallery
from groundsearch.index.store.photo_metadata import PhotoMetadata, read_upload_metadata
from tests.exif_photos import Exif, photo_bytes
from tests.index.format2 import downgrade
from tests.index.synthetic import DIM, ID, search_images, vecs
from tests.oriented import coffee

PHONE = Exif(original="2024:07:01 18:03:05", offset="+02:00", make="Apple", model="iPhone 12")


@pytest.fixture
def gallery(tmp_path):
    g = Gallery.create(tmp_path / "g", DIM, ID)
    yield g
    g.close()


def test_an_upload_and_its_captions_are_one_write_and_stored_once(gallery, tmp_path):
    v = vecs(3)
    image_id, caption_ids, new = gallery.writes.add_photo(b"bytes", "jpg", v[0], ["a", "b"], v[1:])
    assert new and len(caption_ids) == 2
    assert gallery.counts() == {"images": 1, "captions": 2}
    record = gallery.image(image_id)
    assert record.uploaded and record.captions == ("a", "b")
    assert gallery.photo_path(image_id).read_bytes() == b"bytes"
    again, more, new = gallery.writes.add_photo(b"bytes", "jpg", v[0], ["b", "c"], v[1:])
    assert (again, new, len(more)) == (image_id, False, 1)  # same bytes: one photo
    assert [c.text for c in gallery.captions_of(image_id)] == ["a", "b", "c"]
    assert search_images(gallery, v[0], 5)[0].id == image_id
    with pytest.raises(ValueError, match="caption vectors"):
        gallery.writes.add_photo(b"other", "jpg", v[0], ["x", "y"], v[1:2])
    assert gallery.counts() == {"images": 1, "captions": 3}  # the bad write changed nothing
    assert gallery.writes.remove_photo(image_id) == 3
    assert gallery.counts() == {"images": 0, "captions": 0}
    assert list((tmp_path / "g" / "uploads").iterdir()) == []
    with pytest.raises(UnknownItemError):
        gallery.writes.remove_photo(image_id)
    with pytest.raises(UnknownItemError):
        gallery.image(image_id)


def test_open_clears_leftovers_of_interrupted_writes(tmp_path):
    g = Gallery.create(tmp_path / "g", DIM, ID)
    kept, _, _ = g.writes.add_photo(b"kept", "png", vecs(1)[0])
    g.close()
    uploads, index = tmp_path / "g" / "uploads", tmp_path / "g" / "index"
    (uploads / "deadbeef.jpg").write_bytes(b"never committed")
    (uploads / ".x.jpg.abc.tmp").write_bytes(b"half written")
    (index / ".images-123.faiss.tmp").write_bytes(b"half a snapshot")
    (index / "images-0123456789ab.faiss").write_bytes(b"replaced snapshot")
    g = Gallery.open(tmp_path / "g", ID)
    assert sorted(p.name for p in uploads.iterdir()) == [g.image(kept).file]
    assert sorted(p.name for p in index.iterdir() if "images" in p.name and "faiss" in p.name) == [
        json.loads((index / "images.json").read_text())["file"]
    ]
    g.close()


def test_other_models_old_formats_and_missing_galleries_are_refused(tmp_path):
    Gallery.create(tmp_path / "g", DIM, ID).close()
    with pytest.raises(IdentityMismatch, match="was built by"):
        Gallery.open(tmp_path / "g", {"checkpoint_sha256": "0" * 64})
    with pytest.raises(StoreError, match=r"no gallery at .*groundsearch index"):
        Gallery.open(tmp_path / "nothing")
    legacy = tmp_path / "legacy"
    (legacy / "images").mkdir(parents=True)
    (legacy / "images" / "meta.json").write_text("{}")
    with pytest.raises(StoreError, match=r"old format.*--migrate"):
        Gallery.open(legacy)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "gallery.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError, match="not a gallery database"):
        Gallery.open(tmp_path / "bad")


def test_the_same_bytes_uploaded_again_after_a_delete_keep_their_file(tmp_path):
    g = Gallery.create(tmp_path / "g", DIM, ID)
    v = vecs(1)
    first, _, _ = g.writes.add_photo(b"same bytes", "jpg", v[0])
    g.writes.remove_photo(first)
    again, _, new = g.writes.add_photo(b"same bytes", "jpg", v[0])
    assert new and again != first
    assert g.photo_path(again).read_bytes() == b"same bytes"
    g.close()


def test_an_upload_keeps_what_its_bytes_say_and_its_name(gallery):
    v = vecs(2)
    data = photo_bytes(coffee((90, 60)), PHONE)
    meta = read_upload_metadata(data, "IMG_0001.jpg")
    image_id, _, _ = gallery.writes.add_photo(data, "jpg", v[0], meta=meta)
    assert gallery.image(image_id).meta == meta
    assert (meta.taken, meta.camera, meta.folder, meta.name) == (
        "2024-07-01T18:03:05+02:00",
        "Apple iPhone 12",
        None,
        "IMG_0001.jpg",
    )
    assert (meta.width, meta.height) == (90, 60)
    plain, _, _ = gallery.writes.add_photo(photo_bytes(coffee((90, 60))), "jpg", v[1])
    assert gallery.image(plain).meta == PhotoMetadata(width=90, height=60)  # read here
    hit = search_images(gallery, v[0], 1)[0].record
    assert hit.meta == meta  # every read carries it


def test_a_format2_gallery_migrates_on_open_and_its_uploads_are_read_again(tmp_path):
    folder = tmp_path / "g"
    g = Gallery.create(folder, DIM, ID)
    data = photo_bytes(coffee((90, 60)), PHONE)
    image_id, _, _ = g.writes.add_photo(
        data, "jpg", vecs(1)[0], meta=read_upload_metadata(data, "a.jpg")
    )
    g.close()
    downgrade(folder)
    with pytest.raises(StoreError, match="open it once with its writer"):
        Gallery.open(folder, ID, read_only=True)  # a replica writes nothing
    g = Gallery.open(folder, ID)
    try:
        assert g.image(image_id).meta == PhotoMetadata()  # not read yet
        assert g.writes.fill_upload_metadata() == 1
        assert g.writes.fill_upload_metadata() == 0
        assert g.image(image_id).meta == read_upload_metadata(data, None)  # its name is lost
        assert search_images(g, vecs(1)[0], 1)[0].id == image_id
    finally:
        g.close()
    Gallery.open(folder, ID, read_only=True).close()  # format 3: a replica opens it


def test_a_ranking_read_as_ids_and_scores_is_the_search_without_its_records(gallery):
    v = vecs(6)
    ids = []
    for i in range(5):
        meta = read_upload_metadata(photo_bytes(coffee((40, 30)), PHONE), f"{i}.jpg")
        ids.append(gallery.writes.add_photo(f"photo {i}".encode(), "jpg", v[i], meta=meta)[0])
    full = search_images(gallery, v[5], 5)
    assert gallery.rank_images(v[5], 5).pairs() == [(h.id, h.score) for h in full]
    around = gallery.rank_images(gallery.image_vector(ids[0]), 4)
    assert (
        gallery.rank_similar(ids[0], 3).pairs() == [p for p in around.pairs() if p[0] != ids[0]][:3]
    )
    records = gallery.image_records([ids[1], ids[3], 10**6])
    assert set(records) == {ids[1], ids[3]} and records[ids[1]].meta.name == "1.jpg"
    when = gallery.taken_at([*ids, 10**6])
    taken = datetime(2024, 7, 1, 16, 3, 5, tzinfo=UTC).timestamp()  # 18:03:05+02:00
    assert when == dict.fromkeys(ids, taken)
