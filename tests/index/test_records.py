"""The gallery's system of record: its connections, its statements, and the rule that
only ``index/records.py`` knows the schema."""

from __future__ import annotations

import ast
import re
import threading
from pathlib import Path

import numpy as np
import pytest

from groundsearch.index import records
from groundsearch.index.photo_metadata import PhotoMetadata
from groundsearch.index.records import DB_FILE, Records, caption_rows
from tests.index.synthetic import DIM, ID, vecs

INDEX = Path(__file__).resolve().parents[2] / "index"
SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|BEGIN|PRAGMA)\b")


@pytest.fixture
def store(tmp_path):
    store = Records.create(tmp_path / DB_FILE, DIM, "auto", ID)
    yield store
    store.close()


def test_only_the_records_module_holds_sql():
    holders = set()
    for path in sorted(INDEX.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                holders.update([path.name] if SQL.match(node.value) else [])
    assert holders == {"records.py"}


def test_a_removal_is_logged_for_the_photo_and_each_of_its_captions(store):
    v = vecs(3)
    with store.transaction() as db:
        photo = records.insert_photo(db, "sha", "uploads/sha.jpg", v[0], uploaded=True)
        ids = records.insert_captions(db, photo, caption_rows(["a", "b", "a"], v, DIM))
    assert len(ids) == 2  # a photo's caption text is stored once
    with store.transaction() as db:
        assert records.delete_photo(db, photo) == ("uploads/sha.jpg", True, 2)
        assert records.delete_photo(db, photo) is None
    with store.snapshot() as db:
        logged = records.removals_after(db, 0)
        assert {(kind, item) for _, kind, item in logged} == {
            ("captions", ids[0]),
            ("captions", ids[1]),
            ("images", photo),
        }
        assert records.last_removal(db) == logged[-1][0]
        assert records.last_id(db, "images") == photo  # ids are never reused
        assert records.count(db, "images") == 0


def test_a_photo_left_without_files_is_dropped_and_a_moved_one_repointed(store):
    v = vecs(2)
    with store.transaction() as db:
        first = records.insert_photo(db, "sha-1", "/a/1.jpg", v[0])
        second = records.insert_photo(db, "sha-2", "/a/2.jpg", v[1])
        records.record_file(db, "/a/1.jpg", first, 1, 1, run=1)
        records.record_file(db, "/b/1-copy.jpg", first, 1, 1, run=1)
        records.record_file(db, "/a/2.jpg", second, 1, 1, run=1)
        records.mark_seen(db, ["/b/1-copy.jpg"], run=2)
        records.forget_unseen(db, "/a", run=2)  # /a/1.jpg and /a/2.jpg are gone
        assert records.drop_orphans(db) == 1
    db = store.reader()
    assert records.photo_ids(db) == [first]
    assert records.photos(db, [first, second]) == {
        first: ("/b/1-copy.jpg", "sha-1", False, PhotoMetadata(folder="/b", name="1-copy.jpg"))
    }
    assert records.files_of(db, first) == ["/b/1-copy.jpg"]
    assert records.has_files_under(db, "/b") and not records.has_files_under(db, "/a")
    assert records.next_run(db) == 3
    state = records.file_state(db, "/b/1-copy.jpg")
    assert state == (1, 1, first, "sha-1", False)
    np.testing.assert_array_equal(records.vector(db, "images", first), v[0])


def test_captions_must_come_with_one_vector_each():
    v = vecs(2)
    assert caption_rows([], None, DIM) == []
    with pytest.raises(ValueError, match="without their vectors"):
        caption_rows(["a"], None, DIM)
    with pytest.raises(ValueError, match="2 captions but 1 caption vectors"):
        caption_rows(["a", "b"], v[:1], DIM)
    with pytest.raises(ValueError, match=r"shape \(n, 8\)"):
        caption_rows(["a"], np.zeros((1, 3), np.float32), DIM)


def test_a_reader_is_closed_once_its_thread_is_gone(tmp_path):
    """A server's pool threads come and go: their read connections must not pile up."""
    store = Records(tmp_path / DB_FILE)
    try:
        for _ in range(5):
            thread = threading.Thread(target=store.reader)
            thread.start()
            thread.join()
        store.reader()  # a new reader clears those of finished threads
        assert len(store._readers) == 1
    finally:
        store.close()
