"""A gallery's search indexes (FAISS), derived from its records: following other
writers, snapshots loaded then caught up, compaction, the kind picked by size, a
compressed index and a read-only replica that takes up the writer's rebuilds."""

from __future__ import annotations

import json
import sqlite3

from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexing_runs import IndexedFiles
from groundsearch.index.search import search_indexes
from groundsearch.index.search import vectors as vectors_module
from groundsearch.index.search.index_kinds import IndexSettings, choose_kind
from tests.index.synthetic import DIM, ID, indexed, search_images, vecs


def test_another_process_writes_are_followed(tmp_path):
    writer = Gallery.create(tmp_path / "g", DIM, ID)
    reader = Gallery.open(tmp_path / "g", ID)
    v = vecs(3)
    IndexedFiles(writer).add_files([indexed(i, v[i], ("x",)) for i in range(3)], run=1)
    assert reader.counts()["images"] == 0
    reader.indexes.refresh()
    assert reader.counts() == {"images": 3, "captions": 3}
    writer.writes.remove_photo(2)
    reader.indexes.refresh()
    assert reader.counts() == {"images": 2, "captions": 2}
    assert {h.id for h in search_images(reader, v[2], 5)} == {1, 3}
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
    other.writes.remove_photo(1)
    other.close(snapshot=False)  # the snapshot on disk is now behind the records
    again = Gallery.open(tmp_path / "g", ID)
    assert again.counts()["images"] == 4
    assert 1 not in {h.id for h in search_images(again, v[0], 10)}
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
        g.writes.remove_photo(image_id)
    assert g.indexes["images"].tombstones == 10
    g.indexes.maintain()
    assert g.indexes["images"].tombstones == 0 and g.indexes["images"].total == 10
    assert {h.id for h in search_images(g, v[15], 20)} == set(range(11, 21))
    g.close()


def test_a_new_gallery_picks_its_index_kind_by_size(tmp_path):
    gallery = Gallery.create(tmp_path / "g", DIM, ID)
    assert gallery.kind == "auto" and gallery.indexes["images"].kind == "flat"
    assert [choose_kind(n) for n in (1000, 500_000, 5_000_000)] == ["flat", "hnsw", "ivfpq"]
    assert gallery.indexes._kind_for(150_000, "hnsw") == "hnsw"  # shrinking a little keeps it
    assert gallery.indexes._kind_for(50_000, "hnsw") == "flat"
    gallery.close()


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
    assert writer.indexes.describe()["images"].startswith("IVF64,PQ4,Refine(SQfp16) + 0 exact")
    replica.indexes.refresh()
    replica.indexes.maintain()
    assert replica.indexes.describe() == writer.indexes.describe()
    image_id, _, _ = writer.writes.add_photo(
        b"new", "jpg", v[300]
    )  # uploads and deletes still work
    writer.writes.remove_photo(5)
    replica.indexes.refresh()
    for query in (v[300], v[4], v[150]):
        hits = [(h.id, round(h.score, 5)) for h in search_images(replica, query, 10)]
        assert hits == [(h.id, round(h.score, 5)) for h in search_images(writer, query, 10)]
    assert search_images(replica, v[300], 1)[0].id == image_id
    assert 5 not in {h.id for h in search_images(replica, v[4], 50)}
    snapshot = (tmp_path / "g" / "index" / "images.json").stat().st_mtime_ns
    replica.close()  # a replica writes nothing
    assert (tmp_path / "g" / "index" / "images.json").stat().st_mtime_ns == snapshot
    writer.close()
    again = Gallery.open(tmp_path / "g", ID)
    assert (
        again.indexes.describe()["images"].endswith("+ 1 exact") and again.counts()["images"] == 300
    )
    again.close()
