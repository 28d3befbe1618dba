"""Galleries in records format 2 (before photo metadata), for the migration tests: the
schema text exactly as format 2's ``records.py`` executed it, and a gallery rewritten
into it (every row kept, the metadata columns and indexes gone, ``format`` 2)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

#: ``records.SCHEMA`` of format 2, verbatim.
FORMAT2_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS photos (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sha256 TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    uploaded INTEGER NOT NULL DEFAULT 0,
    vector BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    photo_id INTEGER NOT NULL REFERENCES photos(id) ON DELETE CASCADE,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    seen_run INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS files_photo ON files(photo_id);
CREATE TABLE IF NOT EXISTS captions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    photo_id INTEGER NOT NULL REFERENCES photos(id) ON DELETE CASCADE,
    text TEXT NOT NULL,
    vector BLOB NOT NULL,
    UNIQUE (photo_id, text)
);
CREATE TABLE IF NOT EXISTS removals (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    item INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS photo_removed AFTER DELETE ON photos
BEGIN INSERT INTO removals (kind, item) VALUES ('images', OLD.id); END;
CREATE TRIGGER IF NOT EXISTS caption_removed AFTER DELETE ON captions
BEGIN INSERT INTO removals (kind, item) VALUES ('captions', OLD.id); END;
"""


def create_format2(path: Path, dim: int, identity: dict[str, str], kind: str = "auto") -> None:
    """An empty format-2 database at ``path``, as format 2's ``Records.create`` made it."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.executescript(FORMAT2_SCHEMA)
        meta = {"format": 2, "dim": dim, "kind": kind, "identity": identity}
        db.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)",
            [(k, json.dumps(v)) for k, v in meta.items()],
        )
    finally:
        db.close()


def downgrade(gallery_dir: Path) -> None:
    """Rewrite the gallery's records into format 2: the same photos (ids, hashes, paths,
    vectors), files, captions, removals and id counters, without metadata."""
    path = Path(gallery_dir) / "gallery.db"
    old = path.with_name("format3.db")
    for suffix in ("", "-wal", "-shm"):  # a closed gallery has no WAL left; in case
        if Path(f"{path}{suffix}").exists():
            Path(f"{path}{suffix}").rename(f"{old}{suffix}")
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.executescript(FORMAT2_SCHEMA)
        db.execute("ATTACH DATABASE ? AS old", (str(old),))
        db.execute("BEGIN")
        db.execute("INSERT INTO meta SELECT key, value FROM old.meta")
        db.execute("UPDATE meta SET value = '2' WHERE key = 'format'")
        db.execute(
            "INSERT INTO photos (id, sha256, path, uploaded, vector) "
            "SELECT id, sha256, path, uploaded, vector FROM old.photos"
        )
        db.execute("INSERT INTO files SELECT * FROM old.files")
        db.execute("INSERT INTO captions SELECT * FROM old.captions")
        db.execute("INSERT INTO removals SELECT * FROM old.removals")
        db.execute("DELETE FROM sqlite_sequence")
        db.execute("INSERT INTO sqlite_sequence SELECT * FROM old.sqlite_sequence")
        db.execute("COMMIT")
        db.execute("DETACH DATABASE old")
    finally:
        db.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{old}{suffix}").unlink(missing_ok=True)
