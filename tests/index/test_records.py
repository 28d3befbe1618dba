"""The gallery's system of record: its connections, its statements, and the rule that
only ``index/store/records.py`` knows the schema."""

from __future__ import annotations

import ast
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from groundsearch.index.errors import StoreError
from groundsearch.index.filters import sql as filter_sql
from groundsearch.index.store import records
from groundsearch.index.store.photo_metadata import PhotoMetadata
from groundsearch.index.store.records import DB_FILE, Records, caption_rows
from tests.index.format2 import create_format2
from tests.index.synthetic import DIM, ID, vecs

INDEX = Path(__file__).resolve().parents[2] / "index"
SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|ALTER|BEGIN|PRAGMA)\b")


@pytest.fixture
def store(tmp_path):
    store = Records.create(tmp_path / DB_FILE, DIM, "auto", ID)
    yield store
    store.close()


def test_only_the_record_modules_hold_sql():
    # the schema is known in two places: the records and the filters' statements
    holders = set()
    for path in sorted(INDEX.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                rel = path.relative_to(INDEX).as_posix()
                holders.update([rel] if SQL.match(node.value) else [])
    assert holders == {"store/records.py", "filters/sql.py"}


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


def test_a_photos_classes_are_stored_once_read_back_and_removed_with_it(store):
    v = vecs(2)
    ids, probs = np.array([285, 281, 7]), np.array([0.6, 0.2, 0.1], np.float32)
    with store.transaction() as db:
        assert records.stores_classes(db)  # an empty gallery lacks none
        photo = records.insert_photo(db, "sha-1", "/a/1.jpg", v[0])
        bare = records.insert_photo(db, "sha-2", "/a/2.jpg", v[1])
        assert not records.stores_classes(db)
        records.insert_classes(db, photo, ids, probs)
        assert not records.stores_classes(db)  # every photo's, not any
        records.insert_classes(db, photo, ids[::-1], probs)  # written once: kept as first
        with pytest.raises(ValueError, match="same length"):
            records.insert_classes(db, bare, ids, probs[:2])
        with pytest.raises(ValueError, match="between"):
            records.insert_classes(db, bare, np.array([-1]), probs[:1])
    with store.snapshot() as db:
        got = records.classes_of(db, [photo, bare, 999])
        assert set(got) == {photo}
        np.testing.assert_array_equal(got[photo][0], ids)
        np.testing.assert_array_equal(got[photo][1], probs)
    with store.transaction() as db:
        records.delete_photo(db, bare)
        assert records.stores_classes(db)  # the one left has them
        records.delete_photo(db, photo)
    with store.snapshot() as db:
        assert records.classes_of(db, [photo]) == {}


def test_a_database_without_the_classes_table_reads_as_no_classes(tmp_path):
    db = sqlite3.connect(tmp_path / "old.db")
    db.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY)")
    assert records.classes_of(db, [1, 2]) == {} and records.stores_classes(db)  # empty
    db.execute("INSERT INTO photos (id) VALUES (1)")
    assert not records.stores_classes(db)
    db.close()


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
    assert state == (1, 1, first, "sha-1", False, False)
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


# --- format 3: photo metadata, and the migration from format 2 ------------------------------


def format2_store(path: Path, n: int = 3) -> dict[int, bytes]:
    """A format-2 database with ``n`` indexed photos (files, a caption each) written as
    format 2 wrote them; its vectors' bytes by photo id."""
    create_format2(path, DIM, ID)
    v = vecs(n)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for i in range(n):
            db.execute(
                "INSERT INTO photos (sha256, path, uploaded, vector) VALUES (?, ?, 0, ?)",
                (f"sha-{i}", f"/photos/{i}.jpg", records.blob(v[i])),
            )
            db.execute("INSERT INTO files VALUES (?, ?, 10, 1000, 1)", (f"/photos/{i}.jpg", i + 1))
            db.execute(
                "INSERT INTO captions (photo_id, text, vector) VALUES (?, ?, ?)",
                (i + 1, f"caption {i}", records.blob(v[i])),
            )
        return dict(db.execute("SELECT id, vector FROM photos").fetchall())
    finally:
        db.close()


def schema_of(path: Path) -> tuple[list[tuple], list[tuple]]:
    """The photos table's columns and every index's definition."""
    db = sqlite3.connect(path)
    try:
        columns = db.execute("PRAGMA table_info(photos)").fetchall()
        indexes = db.execute(
            "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name"
        ).fetchall()
        return columns, indexes
    finally:
        db.close()


def test_a_format2_database_migrates_in_place_without_touching_a_vector(tmp_path):
    path = tmp_path / DB_FILE
    before = format2_store(path)
    assert len(schema_of(path)[0]) == 5
    with pytest.raises(StoreError, match="open it once with its writer"):
        Records.open(path, ID, migrate=False)  # a replica does not write
    store = Records.open(path, ID)
    try:
        assert store.meta["format"] == 3
        assert not store.migrate_format()  # done: a second writer finds nothing to do
        db = store.reader()
        after = {i: bytes(records.vector(db, "images", i)) for i in before}
        assert after == before  # byte-identical
        assert {i: p[3] for i, p in records.photos(db, list(before)).items()} == {
            i: PhotoMetadata() for i in before
        }
        assert records.file_state(db, "/photos/0.jpg").has_metadata is False
        assert records.caption_texts(db, [1])[1] == [(1, "caption 0")]
    finally:
        store.close()
    fresh = Records.create(tmp_path / "fresh.db", DIM, "auto", ID)
    fresh.close()
    assert schema_of(path) == schema_of(tmp_path / "fresh.db")  # the same columns, indexes
    Records.open(path, ID).close()  # opening again changes nothing


def test_a_migration_that_fails_leaves_format_2_whole(tmp_path):
    path = tmp_path / DB_FILE
    format2_store(path)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE photos_camera (x)")  # the third index cannot be made
    db.close()
    old_schema = schema_of(path)
    with pytest.raises(StoreError, match=r"could not migrate .* it is unchanged"):
        Records.open(path, ID)
    assert schema_of(path) == old_schema  # no column added, no index made
    db = sqlite3.connect(path, isolation_level=None)
    assert db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == ("2",)
    db.execute("DROP TABLE photos_camera")
    db.close()
    Records.open(path, ID).close()
    assert len(schema_of(path)[0]) == 15


@pytest.mark.slow
def test_a_migration_killed_at_any_moment_leaves_format_2_or_3(tmp_path):
    """SIGKILL a process migrating a 20,000-photo database at a range of moments: each
    time the database is whole, in format 2 or format 3, and the next open finishes."""
    template = tmp_path / "template.db"
    create_format2(template, 640, ID)
    db = sqlite3.connect(template, isolation_level=None)
    db.execute("BEGIN")
    rows = np.random.default_rng(0).normal(size=(20_000, 640)).astype(np.float32)
    db.executemany(
        "INSERT INTO photos (sha256, path, uploaded, vector) VALUES (?, ?, 0, ?)",
        ((f"sha-{i}", f"/p/{i}.jpg", records.blob(r)) for i, r in enumerate(rows)),
    )
    db.execute("COMMIT")
    db.close()
    script = (
        "import sys; from pathlib import Path; "
        "from groundsearch.index.store.records import Records; "
        "print('opening', flush=True); Records.open(Path(sys.argv[1])).close(); "
        "print('done', flush=True)"
    )
    outcomes = []
    for delay in (0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8):
        path = tmp_path / f"kill-{delay}.db"
        shutil.copy(template, path)
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline() == "opening\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        columns, indexes = schema_of(path)
        check = sqlite3.connect(path)
        fmt = check.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()[0]
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        check.close()
        names = {name for name, _, _ in indexes}
        if fmt == "2":
            assert len(columns) == 5 and "photos_taken" not in names
        else:
            assert fmt == "3" and len(columns) == 15
            assert {"photos_taken", "photos_folder", "photos_camera", "photos_place"} <= names
        outcomes.append(fmt)
        store = Records.open(path, ID)
        assert store.meta["format"] == 3 and records.count(store.reader(), "images") == 20_000
        store.close()
    assert outcomes  # which moments hit mid-migration depends on the machine: each is checked


def test_stored_metadata_reads_back_and_is_filled_only_once(store):
    v = vecs(3)
    meta = PhotoMetadata(
        taken_at=1.5e9,
        taken="2017-07-14T02:40:00",
        taken_source="exif",
        camera="Canon EOS R5",
        lat=-33.86,
        lon=151.21,
        width=6000,
        height=4000,
        folder="/elsewhere",  # an indexed photo's folder and name are its path's
        name="other.jpg",
    )
    with store.transaction() as db:
        shot = records.insert_photo(db, "sha-1", "/trip/day 1/IMG_1.jpg", v[0], meta=meta)
        upload = records.insert_photo(db, "sha-2", "uploads/sha-2.jpg", v[1], True, meta)
        unread = records.insert_photo(db, "sha-3", "/trip/IMG_3.jpg", v[2])
        records.record_file(db, "/trip/day 1/IMG_1.jpg", shot, 1, 1)
        records.record_file(db, "/trip/IMG_3.jpg", unread, 1, 1)
    db = store.reader()
    got = {i: p[3] for i, p in records.photos(db, [shot, upload, unread]).items()}
    assert got[shot] == replace(meta, folder="/trip/day 1", name="IMG_1.jpg")
    assert got[upload] == replace(meta, folder=None)  # an upload keeps its given name
    assert got[unread] == PhotoMetadata()
    assert records.file_state(db, "/trip/day 1/IMG_1.jpg").has_metadata
    assert not records.file_state(db, "/trip/IMG_3.jpg").has_metadata
    with store.transaction() as db:
        assert not records.fill_metadata(db, unread, PhotoMetadata())  # nothing to store
        assert records.fill_metadata(db, unread, meta)
        assert not records.fill_metadata(db, unread, PhotoMetadata(camera="later"))
        assert not records.fill_metadata(db, shot, PhotoMetadata(camera="later"))
    got = {i: p[3] for i, p in records.photos(store.reader(), [shot, unread]).items()}
    assert got[unread] == replace(meta, folder="/trip", name="IMG_3.jpg")
    assert got[shot].camera == "Canon EOS R5"
    # the photo's file moves: folder and name follow its recorded path
    with store.transaction() as db:
        records.record_file(db, "/home/ü/写真/IMG_1.jpg", shot, 1, 1, run=5)
        records.forget_unseen(db, "/trip/day 1", run=5)
        assert records.drop_orphans(db) == 0
    moved = records.photos(store.reader(), [shot])[shot]
    assert moved[0] == "/home/ü/写真/IMG_1.jpg"
    assert moved[3] == replace(meta, folder="/home/ü/写真", name="IMG_1.jpg")


def _dated_store(store, n: int = 40) -> dict[int, PhotoMetadata]:
    """``n`` photos: times with ties (bursts in one second), every seventh undated, GPS
    for every third (near Paris or far away), two folders; id → its metadata."""
    rng = np.random.default_rng(3)
    v = vecs(n, seed=7)
    metas: dict[int, PhotoMetadata] = {}
    with store.transaction() as db:
        for i in range(n):
            taken = None if i % 7 == 3 else 1.6e9 + 3600.0 * int(rng.integers(0, 12))
            near = (48.85 + i * 4e-4, 2.29 + i * 6e-4)  # some in the box's corners
            place = (near if i % 2 else (40.0, -74.0)) if i % 3 == 0 else None
            meta = PhotoMetadata(
                taken_at=taken,
                taken_source=None if taken is None else "exif",
                lat=place[0] if place else None,
                lon=place[1] if place else None,
                width=4,
            )
            path = f"/photos/{'a' if i % 2 else 'b'}/{i}.jpg"
            photo = records.insert_photo(db, f"sha-{i}", path, v[i], meta=meta)
            metas[photo] = replace(meta, folder=path.rpartition("/")[0])
    return metas


def _by_date(metas: dict[int, PhotoMetadata], newest: bool, keep=lambda m: True) -> list[int]:
    sign = -1 if newest else 1
    dated = [i for i, m in metas.items() if m.taken_at is not None and keep(m)]
    undated = [i for i, m in metas.items() if m.taken_at is None and keep(m)]
    return sorted(dated, key=lambda i: (sign * metas[i].taken_at, sign * i)) + sorted(
        undated, key=lambda i: sign * i
    )


def _pages(db, f, k: int, newest: bool, passing: int | None = None) -> list[list[int]]:
    pages, after = [], None
    while True:
        keys = filter_sql.photos_by_date(db, f, k, newest, after, passing)
        if not keys:
            return pages
        pages.append([key.id for key in keys])
        after = keys[-1]


@pytest.mark.parametrize("newest", [True, False], ids=["newest-first", "oldest-first"])
def test_photos_by_date_page_through_every_photo_once_in_date_order(store, newest):
    from groundsearch.index.filters.conditions import PhotoFilter, haversine_km

    metas = _dated_store(store)
    db = store.reader()
    taken = [m.taken_at for m in metas.values() if m.taken_at is not None]
    assert len(taken) > len(set(taken))  # ties: the id orders them
    for k in (1, 4, 7, 100):
        pages = _pages(db, None, k, newest)
        assert [i for p in pages for i in p] == _by_date(metas, newest)
        assert all(len(p) == k for p in pages[:-1])
    cut = sorted(set(taken))[4]

    def km(m: PhotoMetadata) -> float:
        return np.inf if m.lat is None else float(haversine_km(48.85, 2.29, m.lat, m.lon))

    box = [m for m in metas.values() if m.lat is not None and m.lon > 0]
    in_box = [m for m in box if abs(m.lat - 48.85) < 0.0108 and abs(m.lon - 2.29) < 0.0164]
    assert any(km(m) > 1.2 for m in in_box) and any(km(m) <= 1.2 for m in in_box)
    filters = [
        (PhotoFilter(folder="/photos/a"), lambda m: m.folder == "/photos/a"),
        (PhotoFilter(after=cut), lambda m: m.taken_at is not None and m.taken_at >= cut),
        # near: the exact distance leaves out the photos in the box outside the circle
        (PhotoFilter(near=(48.85, 2.29), within_km=1.2), lambda m: km(m) <= 1.2),
        (
            PhotoFilter(near=(48.85, 2.29), within_km=2000, folder="/photos/a"),
            lambda m: m.lat is not None and m.lon > 0 and m.folder == "/photos/a",
        ),
    ]
    for f, keep in filters:
        want = _by_date(metas, newest, keep)
        assert want, f
        # both plans: the filter's own indexes then a sort, or the date index walked
        for k, passing in ((1, None), (3, None), (50, None), (1, 10**6), (3, 10**6)):
            got = [i for p in _pages(db, f, k, newest, passing) for i in p]
            assert got == want, (f, k, passing)


def test_photos_by_date_after_a_key_ignore_what_changed_before_it(store):
    metas = _dated_store(store, 20)
    db = store.reader()
    first = filter_sql.photos_by_date(db, None, 5)
    before = {key.id for key in first}
    # a photo newer than the page read, and one older; the page's last photo removed
    v = vecs(2, seed=9)
    newest = max(m.taken_at for m in metas.values() if m.taken_at is not None)
    with store.transaction() as db_w:
        new = records.insert_photo(db_w, "sha-n", "/p/n.jpg", v[0], meta=PhotoMetadata(newest + 1))
        old = records.insert_photo(db_w, "sha-o", "/p/o.jpg", v[1], meta=PhotoMetadata(1.0))
        records.delete_photo(db_w, first[-1].id)
    rest = [key.id for key in filter_sql.photos_by_date(db, None, 100, after=first[-1])]
    assert new not in rest and old in rest and not before & set(rest)
    remaining = set(metas) - before
    assert set(rest) == remaining | {old}
