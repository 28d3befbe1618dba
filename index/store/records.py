"""The gallery's system of record: one SQLite database (``gallery.db``) in WAL mode.

Tables: ``photos`` (one per distinct content, with its vector and metadata), ``files``
(every indexed file holding a photo), ``captions``, the append-only ``removals`` and
``edits`` logs the search indexes and filter columns follow, the optional
``photo_classes`` and ``photo_objects``, and ``meta``. Ids come from ``AUTOINCREMENT``, so
"everything after id N" is how a search index catches up. Only this module and
``index.filters.sql`` know the schema; every statement is a function of its connection.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import astuple
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import numpy as np

from groundsearch.index.errors import IdentityMismatch, StoreError
from groundsearch.index.store.photo_metadata import PhotoMetadata

T = TypeVar("T")
DB_FILE = "gallery.db"
FORMAT = 3
#: The formats ``Records.open`` migrates in place.
MIGRATES = (2,)
#: How long a write waits for another process's write transaction.
BUSY_SECONDS = 30.0
#: Format 3's columns of ``photos`` (after ``vector``: a migrated table appends them), in
#: ``PhotoMetadata``'s field order.
METADATA_COLUMNS = dict(
    taken_at="REAL", taken="TEXT", taken_source="TEXT", camera="TEXT", lat="REAL",
    lon="REAL", width="INTEGER", height="INTEGER", folder="TEXT", name="TEXT",
)  # fmt: skip
_META = ", ".join(METADATA_COLUMNS)

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS photos (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sha256 TEXT NOT NULL UNIQUE,
    path TEXT NOT NULL,
    uploaded INTEGER NOT NULL DEFAULT 0,
    vector BLOB NOT NULL,
    {", ".join(f"{c} {t}" for c, t in METADATA_COLUMNS.items())}
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
METADATA_INDEXES = """
CREATE INDEX IF NOT EXISTS photos_taken ON photos(taken_at);
CREATE INDEX IF NOT EXISTS photos_folder ON photos(folder);
CREATE INDEX IF NOT EXISTS photos_camera ON photos(camera COLLATE NOCASE);
CREATE INDEX IF NOT EXISTS photos_uploaded ON photos(uploaded);
CREATE INDEX IF NOT EXISTS photos_place ON photos(lat, lon);
CREATE TABLE IF NOT EXISTS edits (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    item INTEGER NOT NULL
);
CREATE TRIGGER IF NOT EXISTS photo_edited
AFTER UPDATE OF taken_at, folder, camera, lat, lon, uploaded ON photos
BEGIN INSERT INTO edits (item) VALUES (NEW.id); END;
"""
CLASSES_TABLE = """
CREATE TABLE IF NOT EXISTS photo_classes (
    photo_id INTEGER PRIMARY KEY REFERENCES photos(id) ON DELETE CASCADE,
    ids BLOB NOT NULL,
    probs BLOB NOT NULL
);
"""
#: A photo whose file has not been read yet (a format-2 photo): an indexed photo read
#: always has a ``taken_source`` (its mtime at least), an upload always a width.
NOT_READ = "taken_source IS NULL AND width IS NULL"


def folder_sql(path: str) -> str:
    """An indexed photo's folder from the SQL expression ``path`` (up to its last ``/``)."""
    return f"coalesce(nullif(rtrim(rtrim({path}, replace({path}, '/', '')), '/'), ''), '/')"


def name_sql(path: str) -> str:
    """An indexed photo's file name from the SQL expression ``path`` of its path."""
    return f"substr({path}, length(rtrim({path}, replace({path}, '/', ''))) + 1)"


#: The vector tables, by the name the search indexes use.
TABLES = {"images": "photos", "captions": "captions"}


def blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def unblob(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.float32)


def matrix(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """Vector blobs as the rows of one (n, dim) matrix."""
    return np.frombuffer(b"".join(blobs), np.float32).reshape(-1, dim)


def as_matrix(x: np.ndarray, dim: int, what: str = "vectors") -> np.ndarray:
    """``x`` as a C-contiguous float32 ``n×dim`` matrix of finite numbers (ValueError)."""
    arr = np.asarray(x)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise ValueError(f"{what} must have shape (n, {dim}), got {np.shape(x)}")
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{what} must be real numbers, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} contain NaN or infinite values")
    return arr


def caption_rows(
    texts: Sequence[str], vectors: np.ndarray | None, dim: int
) -> list[tuple[str, bytes]]:
    """Captions with their vectors as rows to insert; ValueError if they do not match."""
    if not texts:
        return []
    if vectors is None:
        raise ValueError("captions were given without their vectors")
    rows = as_matrix(vectors, dim, "caption vectors")
    if rows.shape[0] != len(texts):
        raise ValueError(f"{len(texts)} captions but {rows.shape[0]} caption vectors")
    return [(text, blob(v)) for text, v in zip(texts, rows, strict=True)]


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA synchronous = FULL")
    except sqlite3.DatabaseError as exc:
        db.close()
        raise StoreError(f"{path} is not a gallery database ({exc})") from None
    return db


def _statements(db: sqlite3.Connection, script: str) -> None:
    """Run a script's statements one by one (``executescript`` would commit first)."""
    statement = ""
    for part in script.split(";"):
        statement += part + ";"
        if sqlite3.complete_statement(statement):
            if statement.strip(" \n;"):
                db.execute(statement)
            statement = ""


class Records:
    """The connections to ``gallery.db``: one locked writer, one reader per thread."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._write_lock = threading.Lock()
        self._local = threading.local()
        #: Every thread's reader with its thread: a server's worker threads come and go
        #: (an idle pool thread exits), and a reader outliving its thread is closed.
        self._readers: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._writer = _connect(self.path)
        #: transactions this process committed (what it wrote is read back at once)
        self.commits = 0
        try:
            mode = self._writer.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            self._writer.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            self._writer.close()
            raise StoreError(f"{self.path} is not a gallery database ({exc})") from None
        if mode != "wal":
            raise StoreError(f"{self.path}: SQLite could not switch to WAL mode ({mode})")
        columns = {r[1] for r in self._writer.execute("PRAGMA table_info(photos)")}
        if "taken_at" in columns:  # format 3: the edits log (added after format 3 was)
            # a read-only file: its readers do without the log (``edits_after``)
            with contextlib.suppress(sqlite3.OperationalError):
                self._writer.executescript(METADATA_INDEXES)
        # a read-only file: its readers do without classes and objects (``classes_of``)
        with contextlib.suppress(sqlite3.OperationalError):
            self._writer.executescript(CLASSES_TABLE + OBJECTS_TABLE)

    @classmethod
    def create(cls, path: Path, dim: int, kind: str, identity: dict[str, str]) -> Records:
        """A new, empty database (StoreError if one is there)."""
        if path.exists():
            raise StoreError(f"a gallery database already exists at {path}")
        path.parent.mkdir(parents=True, exist_ok=True)
        records = cls(path)
        meta = {"format": FORMAT, "dim": dim, "kind": kind, "identity": identity}
        with records.transaction() as db:
            _statements(db, METADATA_INDEXES)
            db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in meta.items()],
            )
        return records

    @classmethod
    def open(
        cls, path: Path, identity: dict[str, str] | None = None, migrate: bool = True
    ) -> Records:
        """An existing database; IdentityMismatch if another model's vectors are in it.
        A format in ``MIGRATES`` is migrated first, or refused with ``migrate=False``."""
        if not path.is_file():
            raise StoreError(f"no gallery database at {path}")
        records = cls(path)
        try:
            meta = records.meta
            if meta.get("format") in MIGRATES:
                if not migrate:
                    raise StoreError(
                        f"{path} is in gallery format {meta['format']}; open it once with "
                        f"its writer (the server with the write token, or `groundsearch "
                        f"index`), which migrates it to format {FORMAT} in place"
                    )
                records.migrate_format()
                meta = records.meta
            if meta.get("format") != FORMAT:
                raise StoreError(f"{path}: unsupported gallery format {meta.get('format')!r}")
            if identity is not None and meta.get("identity") != identity:
                raise IdentityMismatch(
                    f"the gallery at {path.parent} was built by {meta.get('identity')!r}, not "
                    f"by {identity!r}; index the photos again into a new gallery folder"
                )
        except BaseException:
            records.close()
            raise
        return records

    def migrate_format(self) -> bool:
        """Migrate a format-2 database to format 3 in one transaction (columns added);
        False when another process did first."""
        try:
            with self.transaction() as db:
                row = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if row is None or json.loads(row[0]) not in MIGRATES:
                    return False
                have = {r[1] for r in db.execute("PRAGMA table_info(photos)")}
                for column, kind in METADATA_COLUMNS.items():
                    if column not in have:
                        db.execute(f"ALTER TABLE photos ADD COLUMN {column} {kind}")
                _statements(db, METADATA_INDEXES)
                db.execute("UPDATE meta SET value = ? WHERE key = 'format'", (json.dumps(FORMAT),))
        except sqlite3.Error as exc:
            raise StoreError(
                f"{self.path}: could not migrate the gallery to format {FORMAT} ({exc}); "
                "it is unchanged"
            ) from None
        return True

    @property
    def meta(self) -> dict[str, Any]:
        rows = self.reader().execute("SELECT key, value FROM meta").fetchall()
        return {k: json.loads(v) for k, v in rows}

    def close(self) -> None:
        """Close every connection (readers of all threads too)."""
        with self._write_lock:
            for _, db in self._readers:
                db.close()
            self._readers.clear()
            self._writer.close()

    def reader(self) -> sqlite3.Connection:
        """This thread's read connection."""
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = _connect(self.path)
            with self._write_lock:
                for _, gone in [r for r in self._readers if not r[0].is_alive()]:
                    gone.close()
                self._readers = [r for r in self._readers if r[0].is_alive()]
                self._readers.append((threading.current_thread(), db))
        return db

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on error)."""
        with self._write_lock:
            db = self._writer
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                raise StoreError(f"the gallery database is busy or read-only: {exc}") from None
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            try:
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                db.execute("ROLLBACK")
                raise StoreError(f"could not commit to the gallery database: {exc}") from None
            self.commits += 1

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees the same committed state."""
        db = self.reader()
        db.execute("BEGIN")
        try:
            yield db
        finally:
            db.execute("COMMIT")


def vectors_after(
    db: sqlite3.Connection, kind: str, after: int, dim: int, limit: int | None = None
) -> tuple[list[int], np.ndarray]:
    """Ids and vectors of ``kind`` with id > ``after``, in id order."""
    sql = f"SELECT id, vector FROM {TABLES[kind]} WHERE id > ? ORDER BY id"
    rows = db.execute(sql + (f" LIMIT {int(limit)}" if limit else ""), (after,)).fetchall()
    return [r[0] for r in rows], matrix([r[1] for r in rows], dim)


def chunks(
    db: sqlite3.Connection, kind: str, dim: int, limit: int = 50_000
) -> Iterator[tuple[list[int], np.ndarray]]:
    """Every vector of ``kind`` in id order, ``limit`` at a time."""
    after = 0
    while (chunk := vectors_after(db, kind, after, dim, limit))[0]:
        yield chunk
        after = chunk[0][-1]


def count(db: sqlite3.Connection, kind: str) -> int:
    return int(db.execute(f"SELECT count(*) FROM {TABLES[kind]}").fetchone()[0])


def random_ids(db: sqlite3.Connection, kind: str, n: int, seed: int = 0) -> np.ndarray:
    """About ``n`` ids of ``kind`` drawn at random, sorted (by id: no table scan)."""
    top = last_id(db, kind)
    if top <= 0 or n <= 0:
        return np.empty(0, np.int64)
    return np.sort(np.random.default_rng(seed).choice(top, size=min(n, top), replace=False) + 1)


def sample_vectors(
    db: sqlite3.Connection, kind: str, n: int, dim: int, seed: int = 0
) -> np.ndarray:
    """About ``n`` vectors of ``kind`` at random (``random_ids``)."""
    ids = random_ids(db, kind, n, seed).tolist()
    rows = _rows_in(db, f"SELECT vector FROM {TABLES[kind]} WHERE id IN", ids)
    return matrix([r[0] for r in rows], dim)


def removals_after(db: sqlite3.Connection, after: int) -> list[tuple[int, str, int]]:
    """(seq, kind, id) of removals after ``after``."""
    return db.execute(
        "SELECT seq, kind, item FROM removals WHERE seq > ? ORDER BY seq", (after,)
    ).fetchall()


def last_removal(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT max(seq) FROM removals").fetchone()
    return int(row[0] or 0)


def edits_after(db: sqlite3.Connection, after: int) -> list[tuple[int, int]]:
    """(seq, photo id) of filter columns changed in place after ``after`` (none without
    the log: a read-only file a writer never opened)."""
    try:
        return db.execute(
            "SELECT seq, item FROM edits WHERE seq > ? ORDER BY seq", (after,)
        ).fetchall()
    except sqlite3.OperationalError:
        return []


#: The filter columns of ``photos`` as the filters read them (``PhotoFilter.masks``).
FILTER_COLUMNS = "id, taken_at, folder, lower(camera), lat, lon, uploaded"


def filter_rows_after(db: sqlite3.Connection, after: int, limit: int) -> list[tuple[Any, ...]]:
    """``FILTER_COLUMNS`` of up to ``limit`` photos with id > ``after``, in id order."""
    return db.execute(
        f"SELECT {FILTER_COLUMNS} FROM photos WHERE id > ? ORDER BY id LIMIT ?", (after, limit)
    ).fetchall()


def filter_rows(db: sqlite3.Connection, ids: Sequence[int]) -> list[tuple[Any, ...]]:
    """The filter columns of the live photos among ``ids``, in id order."""
    return db.execute(
        f"SELECT {FILTER_COLUMNS} FROM photos WHERE id IN (SELECT value FROM json_each(?)) "
        "ORDER BY id",
        (json.dumps([int(i) for i in ids]),),
    ).fetchall()


def last_edit(db: sqlite3.Connection) -> int:
    try:
        row = db.execute("SELECT max(seq) FROM edits").fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0] or 0)


def last_id(db: sqlite3.Connection, kind: str) -> int:
    row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (TABLES[kind],))
    found = row.fetchone()
    return int(found[0]) if found else 0


def photo_ids(db: sqlite3.Connection) -> list[int]:
    """Every photo's id, oldest first."""
    return [r[0] for r in db.execute("SELECT id FROM photos ORDER BY id")]


def photos(
    db: sqlite3.Connection, ids: Sequence[int]
) -> dict[int, tuple[str, str, bool, PhotoMetadata]]:
    """id → (path, sha256, uploaded, metadata) of the live photos among ``ids``."""
    rows = _rows_in(db, f"SELECT id, path, sha256, uploaded, {_META} FROM photos WHERE id IN", ids)
    return {r[0]: (r[1], r[2], bool(r[3]), PhotoMetadata(*r[4:])) for r in rows}


def metadata_row(meta: PhotoMetadata, path: str, uploaded: bool) -> tuple[Any, ...]:
    """``meta`` as the values of ``METADATA_COLUMNS`` (folder and name from ``path``)."""
    values = dict(zip(METADATA_COLUMNS, astuple(meta), strict=True))
    folder, _, name = path.rpartition("/")
    values |= {"folder": None} if uploaded else {"folder": folder or "/", "name": name}
    return tuple(values.values())


def caption_texts(
    db: sqlite3.Connection, photo_ids: Sequence[int]
) -> dict[int, list[tuple[int, str]]]:
    """photo id → [(caption id, text)], in caption order."""
    out: dict[int, list[tuple[int, str]]] = {}
    select = "SELECT photo_id, id, text FROM captions WHERE photo_id IN"
    for photo_id, caption_id, text in _rows_in(db, select, photo_ids, "ORDER BY id"):
        out.setdefault(photo_id, []).append((caption_id, text))
    return out


def captions(db: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[str, int]]:
    """caption id → (text, photo id) of the live captions among ``ids``."""
    rows = _rows_in(db, "SELECT id, text, photo_id FROM captions WHERE id IN", ids)
    return {r[0]: (r[1], r[2]) for r in rows}


def vector(db: sqlite3.Connection, kind: str, item: int) -> np.ndarray | None:
    row = db.execute(f"SELECT vector FROM {TABLES[kind]} WHERE id = ?", (item,)).fetchone()
    return None if row is None else unblob(row[0]).copy()


def _rows_in(
    db: sqlite3.Connection, select: str, ids: Sequence[int], then: str = ""
) -> Iterator[tuple[Any, ...]]:
    """The rows of ``select`` (ending ``IN``) for ``ids``, 500 ids a query (SQLite's limit)."""
    wanted = [int(i) for i in ids]
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        yield from db.execute(f"{select} ({','.join('?' * len(chunk))}) {then}", chunk)


def _unless_missing(query: Callable[[], T], otherwise: Callable[[], T]) -> T:
    """``query()``, or ``otherwise()`` when its table is missing (a read-only file)."""
    try:
        return query()
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        return otherwise()


def vectors_of(db: sqlite3.Connection, kind: str, ids: Sequence[int]) -> dict[int, np.ndarray]:
    """The vectors of the items ``ids`` still there, by id."""
    rows = _rows_in(db, f"SELECT id, vector FROM {TABLES[kind]} WHERE id IN", ids)
    return {int(i): unblob(v).copy() for i, v in rows}


def classes_of(
    db: sqlite3.Connection, ids: Sequence[int]
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """photo id → stored classes (ids, probabilities, best first) of those among ``ids``."""
    select = "SELECT photo_id, ids, probs FROM photo_classes WHERE photo_id IN"
    rows = _unless_missing(lambda: list(_rows_in(db, select, ids)), lambda: [])
    return {
        int(i): (np.frombuffer(c, np.int16).astype(np.int64), unblob(q).copy()) for i, c, q in rows
    }


def stores_classes(db: sqlite3.Connection) -> bool:
    """Whether every photo has stored classes (true of an empty gallery)."""
    sql = (
        "SELECT 1 FROM photos p WHERE NOT EXISTS "
        "(SELECT 1 FROM photo_classes c WHERE c.photo_id = p.id) LIMIT 1"
    )
    every = "SELECT 1 FROM photos LIMIT 1"
    return _unless_missing(lambda: db.execute(sql), lambda: db.execute(every)).fetchone() is None


def files_of(db: sqlite3.Connection, photo_id: int) -> list[str]:
    """The indexed files that hold a photo's content, oldest first."""
    rows = db.execute("SELECT path FROM files WHERE photo_id = ? ORDER BY rowid", (photo_id,))
    return [r[0] for r in rows]


def photo_of_sha(db: sqlite3.Connection, sha256: str) -> int | None:
    row = db.execute("SELECT id FROM photos WHERE sha256 = ?", (sha256,)).fetchone()
    return None if row is None else int(row[0])


class FileState(NamedTuple):
    """What the records hold of an indexed file."""

    size: int
    mtime_ns: int
    photo_id: int
    sha256: str
    #: whether its photo's metadata was read (False: a format-2 photo to backfill)
    has_metadata: bool
    #: whether its photo's classes are stored (False: indexed before they were kept)
    has_classes: bool = True


def file_state(db: sqlite3.Connection, path: str) -> FileState | None:
    """What the records hold of an indexed file (on a writer's database)."""
    row = db.execute(
        f"SELECT f.size, f.mtime_ns, f.photo_id, p.sha256, NOT ({NOT_READ}), "
        "EXISTS (SELECT 1 FROM photo_classes c WHERE c.photo_id = f.photo_id) FROM files f "
        "JOIN photos p ON p.id = f.photo_id WHERE f.path = ?",
        (path,),
    ).fetchone()
    if row is None:
        return None
    return FileState(int(row[0]), int(row[1]), int(row[2]), str(row[3]), bool(row[4]), bool(row[5]))


def uploads_not_read(db: sqlite3.Connection) -> list[tuple[int, str]]:
    """(id, path) of the uploaded photos whose metadata was never read (format 2)."""
    sql = f"SELECT id, path FROM photos WHERE uploaded = 1 AND {NOT_READ} ORDER BY id"
    return [(int(i), str(p)) for i, p in db.execute(sql)]


def holds_upload(db: sqlite3.Connection, path: str) -> bool:
    """Whether an uploaded photo is stored at ``path`` (``uploads/…``)."""
    sql = "SELECT 1 FROM photos WHERE uploaded = 1 AND path = ? LIMIT 1"
    return db.execute(sql, (path,)).fetchone() is not None


def uploaded_paths(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT path FROM photos WHERE uploaded = 1")}


def indexed_files(db: sqlite3.Connection) -> list[tuple[str, int]]:
    """(path, photo id) of every indexed file, by path."""
    rows = db.execute("SELECT path, photo_id FROM files ORDER BY path").fetchall()
    return [(str(p), int(i)) for p, i in rows]


def named_files(db: sqlite3.Connection) -> list[tuple[str, int]]:
    """(path, photo id) of every indexed file (by path), then of every uploaded photo."""
    uploads = db.execute("SELECT path, id FROM photos WHERE uploaded = 1").fetchall()
    return indexed_files(db) + [(str(p), int(i)) for p, i in uploads]


def has_files_under(db: sqlite3.Connection, folder: str) -> bool:
    """Whether any indexed file lies under ``folder``."""
    prefix = folder.rstrip("/") + "/"
    sql = "SELECT 1 FROM files WHERE substr(path, 1, ?) = ? LIMIT 1"
    return db.execute(sql, (len(prefix), prefix)).fetchone() is not None


def next_run(db: sqlite3.Connection) -> int:
    """A number for a new indexing run (larger than every run before)."""
    row = db.execute("SELECT max(seen_run) FROM files").fetchone()
    return int(row[0] or 0) + 1


def insert_photo(
    db: sqlite3.Connection,
    sha256: str,
    path: str,
    vector: np.ndarray,
    uploaded: bool = False,
    meta: PhotoMetadata | None = None,
) -> int:
    """A new photo's id. ``meta``: what its file says (None: not read, NULLs)."""
    none = (None,) * len(METADATA_COLUMNS)
    values = metadata_row(meta, path, uploaded) if meta is not None else none
    marks = ", ".join("?" * len(METADATA_COLUMNS))
    cur = db.execute(
        f"INSERT INTO photos (sha256, path, uploaded, vector, {_META}) "
        f"VALUES (?, ?, ?, ?, {marks})",
        (sha256, path, int(uploaded), blob(vector), *values),
    )
    return int(cur.lastrowid or 0)


def insert_classes(
    db: sqlite3.Connection, photo_id: int, ids: np.ndarray, probs: np.ndarray
) -> None:
    """Store a photo's most probable classes (ids and probabilities, best first), once."""
    ids = np.asarray(ids).ravel()
    probs = np.asarray(probs).ravel()
    if ids.shape != probs.shape or ids.size == 0:
        raise ValueError("a photo's classes are ids and probabilities of the same length")
    if ids.min() < 0 or ids.max() > np.iinfo(np.int16).max:
        raise ValueError("class ids must be between 0 and 32767")
    db.execute(
        "INSERT OR IGNORE INTO photo_classes (photo_id, ids, probs) VALUES (?, ?, ?)",
        (photo_id, ids.astype(np.int16).tobytes(), blob(probs)),
    )


def fill_metadata(db: sqlite3.Connection, photo_id: int, meta: PhotoMetadata) -> bool:
    """Store a photo's metadata if never read (the format-2 backfill); whether it was."""
    if meta == PhotoMetadata():
        return False
    row = db.execute(
        f"SELECT path, uploaded FROM photos WHERE id = ? AND {NOT_READ}", (photo_id,)
    ).fetchone()
    if row is None:
        return False
    sets = ", ".join(f"{c} = ?" for c in METADATA_COLUMNS)
    values = metadata_row(meta, str(row[0]), bool(row[1]))
    db.execute(f"UPDATE photos SET {sets} WHERE id = ?", (*values, photo_id))
    return True


def insert_captions(
    db: sqlite3.Connection, photo_id: int, rows: Sequence[tuple[str, bytes]]
) -> list[int]:
    """Insert captions (``caption_rows``) a photo does not have yet; returns the new ids."""
    ids = []
    for text, vec in rows:
        cur = db.execute(
            "INSERT OR IGNORE INTO captions (photo_id, text, vector) VALUES (?, ?, ?)",
            (photo_id, text, vec),
        )
        if cur.rowcount:
            ids.append(int(cur.lastrowid or 0))
    return ids


def delete_photo(db: sqlite3.Connection, photo_id: int) -> tuple[str, bool, int] | None:
    """Delete a photo with its captions and files: (path, uploaded, captions removed), or
    None if there is no such photo."""
    row = db.execute("SELECT path, uploaded FROM photos WHERE id = ?", (photo_id,)).fetchone()
    if row is None:
        return None
    n = db.execute("SELECT count(*) FROM captions WHERE photo_id = ?", (photo_id,)).fetchone()[0]
    db.execute("DELETE FROM photos WHERE id = ?", (photo_id,))
    return str(row[0]), bool(row[1]), int(n)


def record_file(
    db: sqlite3.Connection, path: str, photo_id: int, size: int, mtime_ns: int, run: int = 0
) -> int | None:
    """Record that ``path`` holds a photo (seen by ``run``); the photo it held before."""
    before = db.execute("SELECT photo_id FROM files WHERE path = ?", (path,)).fetchone()
    db.execute(
        "INSERT INTO files (path, photo_id, size, mtime_ns, seen_run) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET "
        "photo_id = excluded.photo_id, size = excluded.size, "
        "mtime_ns = excluded.mtime_ns, seen_run = excluded.seen_run",
        (path, photo_id, size, mtime_ns, run),
    )
    return None if before is None else int(before[0])


def mark_seen(db: sqlite3.Connection, paths: Sequence[str], run: int) -> None:
    db.executemany("UPDATE files SET seen_run = ? WHERE path = ?", [(run, p) for p in paths])


def forget_unseen(db: sqlite3.Connection, root: str, run: int) -> None:
    """Forget the files at or under ``root`` that ``run`` did not see."""
    prefix = root.rstrip("/") + "/"
    db.execute(
        "DELETE FROM files WHERE seen_run <> ? AND (path = ? OR substr(path, 1, ?) = ?)",
        (run, root, len(prefix), prefix),
    )


def forget_files(db: sqlite3.Connection, path: str) -> None:
    """Forget the file at ``path`` and every file under it (a folder)."""
    prefix = path.rstrip("/") + "/"
    db.execute(
        "DELETE FROM files WHERE path = ? OR substr(path, 1, ?) = ?", (path, len(prefix), prefix)
    )


def drop_orphans(db: sqlite3.Connection, photo_id: int | None = None) -> int:
    """Remove indexed photos no file holds (only ``photo_id``, if given), repoint a photo
    whose path is no longer one of its files; returns how many went."""
    where = "AND id = ?" if photo_id is not None else ""
    args = (photo_id,) if photo_id is not None else ()
    cur = db.execute(
        "DELETE FROM photos WHERE uploaded = 0 AND NOT EXISTS "
        f"(SELECT 1 FROM files WHERE files.photo_id = photos.id) {where}",
        args,
    )
    # every SET expression reads the row as it was: folder and name from the new path too
    first = "(SELECT path FROM files WHERE files.photo_id = photos.id ORDER BY rowid LIMIT 1)"
    db.execute(
        f"UPDATE photos SET path = {first}, folder = {folder_sql(first)}, "
        f"name = {name_sql(first)} "
        "WHERE uploaded = 0 AND NOT EXISTS (SELECT 1 FROM files "
        f"WHERE files.path = photos.path AND files.photo_id = photos.id) {where}",
        args,
    )
    return cur.rowcount


# Each photo's object detector scores (``index.ingest.objects``), one float16 row a photo.
OBJECTS_TABLE = """
CREATE TABLE IF NOT EXISTS photo_objects (
    photo_id INTEGER PRIMARY KEY REFERENCES photos(id) ON DELETE CASCADE,
    scores BLOB NOT NULL
);
"""


def objects_of(db: sqlite3.Connection, ids: Sequence[int], kinds: int) -> np.ndarray:
    """The stored scores of photos ``ids``, in order (a row of NaN for a photo without)."""
    out = np.full((len(ids), kinds), np.nan, np.float32)
    where = {int(i): j for j, i in enumerate(ids)}
    select = "SELECT photo_id, scores FROM photo_objects WHERE photo_id IN"
    for photo, data in _unless_missing(lambda: list(_rows_in(db, select, list(where))), lambda: []):
        scores = np.frombuffer(data, np.float16)
        if scores.size == kinds:
            out[where[int(photo)]] = scores
    return out


def lacking_objects(db: sqlite3.Connection, folder: Path) -> list[tuple[int, Path]]:
    """(id, file) of every photo without stored scores, by id."""
    sql = (
        "SELECT id, path FROM photos p WHERE NOT EXISTS "
        "(SELECT 1 FROM photo_objects o WHERE o.photo_id = p.id) ORDER BY id"
    )
    every = "SELECT id, path FROM photos ORDER BY id"
    rows = _unless_missing(lambda: db.execute(sql), lambda: db.execute(every)).fetchall()
    return [(int(i), folder / p) for i, p in rows]


def insert_objects(db: sqlite3.Connection, scores: Mapping[int, np.ndarray]) -> int:
    """Store photos' scores (photo id → scores) but a gone photo's; how many were stored."""
    before = db.total_changes
    db.executemany(
        "INSERT OR REPLACE INTO photo_objects (photo_id, scores) "
        "SELECT ?, ? WHERE EXISTS (SELECT 1 FROM photos WHERE id = ?)",
        [(int(i), np.asarray(s, np.float16).tobytes(), int(i)) for i, s in scores.items()],
    )
    return db.total_changes - before
