"""A gallery's records (SQLite) and its derived search indexes (FAISS), with synthetic
vectors: atomic writes, content dedup, following other writers, snapshots, compaction,
leftovers of interrupted writes."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from groundsearch.index import search_indexes
from groundsearch.index import vectors as vectors_module
from groundsearch.index.errors import IdentityMismatch, StoreError, UnknownItemError
from groundsearch.index.gallery import Gallery
from groundsearch.index.index_kinds import IndexSettings, choose_kind
from groundsearch.index.indexing_runs import IndexedFile, IndexedFiles

DIM = 8
ID = {"checkpoint_sha256": "c" * 64}


def vecs(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def indexed(i: int, v: np.ndarray, captions: tuple[str, ...] = ()) -> IndexedFile:
    cv = vecs(len(captions), seed=100 + i) if captions else None
    return IndexedFile(f"/photos/{i}.jpg", 10 + i, 1000 + i, f"sha-{i}", v, captions, cv)


@pytest.fixture
def gallery(tmp_path):
    g = Gallery.create(tmp_path / "g", DIM, ID)
    yield g
    g.close()


def test_an_upload_and_its_captions_are_one_write_and_stored_once(gallery, tmp_path):
    v = vecs(3)
    image_id, caption_ids, new = gallery.add_photo(b"bytes", "jpg", v[0], ["a", "b"], v[1:])
    assert new and len(caption_ids) == 2
    assert gallery.counts() == {"images": 1, "captions": 2}
    record = gallery.image(image_id)
    assert record.uploaded and record.captions == ("a", "b")
    assert gallery.photo_path(image_id).read_bytes() == b"bytes"
    again, more, new = gallery.add_photo(b"bytes", "jpg", v[0], ["b", "c"], v[1:])
    assert (again, new, len(more)) == (image_id, False, 1)  # same bytes: one photo
    assert [c.text for c in gallery.captions_of(image_id)] == ["a", "b", "c"]
    assert gallery.search_images(v[0], 5)[0][0].id == image_id
    with pytest.raises(ValueError, match="caption vectors"):
        gallery.add_photo(b"other", "jpg", v[0], ["x", "y"], v[1:2])
    assert gallery.counts() == {"images": 1, "captions": 3}  # the bad write changed nothing
    assert gallery.remove_photo(image_id) == 3
    assert gallery.counts() == {"images": 0, "captions": 0}
    assert list((tmp_path / "g" / "uploads").iterdir()) == []
    with pytest.raises(UnknownItemError):
        gallery.remove_photo(image_id)
    with pytest.raises(UnknownItemError):
        gallery.image(image_id)


def test_indexed_files_dedup_by_content_and_follow_changes(gallery):
    v = vecs(4)
    files = IndexedFiles(gallery)
    added = files.add_files([indexed(i, v[i], (f"cap {i}",)) for i in range(3)], run=1)
    assert (added.photos, added.files, added.captions) == (3, 3, 3)
    copy = IndexedFile("/elsewhere/copy.jpg", 10, 1000, "sha-0")  # same content as 0.jpg
    assert files.add_files([copy], run=1).photos == 0
    assert gallery.counts()["images"] == 3
    hits = gallery.search_images(v[0], 3)
    assert len({r.id for r, _ in hits}) == 3  # never the same photo twice
    # 0.jpg's content changes: the photo moves to the copy's path, a new photo appears
    changed = IndexedFile("/photos/0.jpg", 99, 2000, "sha-new", v[3])
    assert files.add_files([changed], run=2).photos == 1
    first = gallery.image(hits[0][0].id if hits[0][0].path.endswith("0.jpg") else 1)
    assert first.path == "/elsewhere/copy.jpg"
    # run 3 sees only 1.jpg under /photos: 0.jpg and 2.jpg are gone from disk
    files.mark_seen(["/photos/1.jpg"], run=3)
    assert files.forget_unseen(["/photos"], run=3) == 2  # sha-new and 2.jpg's photo
    paths = sorted(r.path for r, _ in gallery.search_images(v[0], 10))
    assert paths == ["/elsewhere/copy.jpg", "/photos/1.jpg"]
    assert gallery.counts() == {"images": 2, "captions": 2}


def test_another_process_writes_are_followed(tmp_path):
    writer = Gallery.create(tmp_path / "g", DIM, ID)
    reader = Gallery.open(tmp_path / "g", ID)
    v = vecs(3)
    IndexedFiles(writer).add_files([indexed(i, v[i], ("x",)) for i in range(3)], run=1)
    assert reader.counts()["images"] == 0
    reader.indexes.refresh()
    assert reader.counts() == {"images": 3, "captions": 3}
    writer.remove_photo(2)
    reader.indexes.refresh()
    assert reader.counts() == {"images": 2, "captions": 2}
    assert {r.id for r, _ in reader.search_images(v[2], 5)} == {1, 3}
    reader.close()
    writer.close()


def test_snapshots_are_loaded_then_caught_up(tmp_path):
    v = vecs(6)
    g = Gallery.create(tmp_path / "g", DIM, ID)
    IndexedFiles(g).add_files([indexed(i, v[i]) for i in range(4)], run=1)
    g.close()  # snapshots both indexes
    doc = json.loads((tmp_path / "g" / "index" / "images.json").read_text())
    assert doc["last_id"] == 4
    other = Gallery.open(tmp_path / "g", ID)
    IndexedFiles(other).add_files([indexed(4, v[4])], run=2)
    other.remove_photo(1)
    other.close(snapshot=False)  # the snapshot on disk is now behind the records
    again = Gallery.open(tmp_path / "g", ID)
    assert again.counts()["images"] == 4
    assert 1 not in {r.id for r, _ in again.search_images(v[0], 10)}
    again.close()
    # a snapshot newer than the records (a database put back from a backup) is rebuilt
    db = sqlite3.connect(tmp_path / "g" / "gallery.db")
    db.execute("DELETE FROM photos WHERE id = 5")
    db.execute("DELETE FROM sqlite_sequence")
    db.commit()
    db.close()
    rebuilt = Gallery.open(tmp_path / "g", ID)
    assert rebuilt.counts()["images"] == 3
    rebuilt.close()


def test_many_removals_are_compacted(tmp_path, monkeypatch):
    monkeypatch.setattr(search_indexes, "COMPACT_MIN", 5)
    g = Gallery.create(tmp_path / "g", DIM, ID, kind="hnsw")
    v = vecs(20)
    IndexedFiles(g).add_files([indexed(i, v[i]) for i in range(20)], run=1)
    for image_id in range(1, 11):
        g.remove_photo(image_id)
    assert g.indexes["images"].tombstones == 10
    g.indexes.maintain()
    assert g.indexes["images"].tombstones == 0 and g.indexes["images"].total == 10
    assert {r.id for r, _ in g.search_images(v[15], 20)} == set(range(11, 21))
    g.close()


def test_open_clears_leftovers_of_interrupted_writes(tmp_path):
    g = Gallery.create(tmp_path / "g", DIM, ID)
    kept, _, _ = g.add_photo(b"kept", "png", vecs(1)[0])
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
    first, _, _ = g.add_photo(b"same bytes", "jpg", v[0])
    g.remove_photo(first)
    again, _, new = g.add_photo(b"same bytes", "jpg", v[0])
    assert new and again != first
    assert g.photo_path(again).read_bytes() == b"same bytes"
    g.close()


def test_a_reader_is_closed_once_its_thread_is_gone(tmp_path):
    """A server's pool threads come and go: their read connections must not pile up."""
    import threading

    from groundsearch.index.records import Records

    records = Records(tmp_path / "gallery.db")
    try:
        for _ in range(5):
            thread = threading.Thread(target=records.reader)
            thread.start()
            thread.join()
        records.reader()  # a new reader clears those of finished threads
        assert len(records._readers) == 1
    finally:
        records.close()


def test_a_new_gallery_picks_its_index_kind_by_size(gallery):
    assert gallery.kind == "auto" and gallery.indexes["images"].kind == "flat"
    assert [choose_kind(n) for n in (1000, 500_000, 5_000_000)] == ["flat", "hnsw", "ivfpq"]
    assert gallery.indexes._kind_for(150_000, "hnsw") == "hnsw"  # shrinking a little keeps it
    assert gallery.indexes._kind_for(50_000, "hnsw") == "flat"


def test_a_compressed_gallery_takes_writes_and_a_replica_takes_up_its_rebuilds(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(vectors_module, "DELTA_MIN", 100)
    writer = Gallery.create(tmp_path / "g", DIM, ID, kind="ivfpq")
    writer.indexes.settings = IndexSettings(m=4, nprobe=64, k_factor=50)
    replica = Gallery.open(tmp_path / "g", ID, read_only=True)
    v = vecs(400)
    IndexedFiles(writer).add_files([indexed(i, v[i], ("x",)) for i in range(300)], run=1)
    assert writer.indexes["images"].delta == 300  # not trained yet: all exact
    writer.indexes.maintain()  # the delta is due: trained, filled, written, snapshotted
    assert writer.index_kinds()["images"].startswith("IVF64,PQ4,Refine(SQfp16) + 0 exact")
    replica.indexes.refresh()
    replica.indexes.maintain()
    assert replica.index_kinds() == writer.index_kinds()
    image_id, _, _ = writer.add_photo(b"new", "jpg", v[300])  # uploads and deletes still work
    writer.remove_photo(5)
    replica.indexes.refresh()
    for query in (v[300], v[4], v[150]):
        hits = [(r.id, round(s, 5)) for r, s in replica.search_images(query, 10)]
        assert hits == [(r.id, round(s, 5)) for r, s in writer.search_images(query, 10)]
    assert replica.search_images(v[300], 1)[0][0].id == image_id
    assert 5 not in {r.id for r, _ in replica.search_images(v[4], 50)}
    snapshot = (tmp_path / "g" / "index" / "images.json").stat().st_mtime_ns
    replica.close()  # a replica writes nothing
    assert (tmp_path / "g" / "index" / "images.json").stat().st_mtime_ns == snapshot
    writer.close()
    again = Gallery.open(tmp_path / "g", ID)
    assert again.index_kinds()["images"].endswith("+ 1 exact") and again.counts()["images"] == 300
    again.close()
