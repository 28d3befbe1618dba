"""A gallery: photos and captions in a SQLite database, searched through FAISS.

    gallery = Gallery.create(folder, dim, checkpoint_identity(checkpoint))
    gallery = Gallery.open(folder, checkpoint_identity(checkpoint))   # refuses another model
    gallery.search_images(vector, k)            # [(ImageRecord, score), …]
    gallery.add_photo(data, "jpg", vector, captions, caption_vectors)   # an upload
    gallery.add_files([IndexedFile(…), …])      # photos indexed where they lie
    gallery.remove_photo(image_id)
    gallery.close()                              # snapshots the search indexes

A gallery folder holds ``gallery.db`` (``groundsearch.index.records``: the system of
record), ``index/`` (snapshots of the two FAISS indexes, ``groundsearch.index.vectors``:
derived, rebuilt when missing or stale) and ``uploads/`` (photos added through the API;
indexed photos stay where they are). The index kind is fixed at creation or ``auto``:
picked by size (``index_kinds.choose_kind``) and changed by a rebuild when the gallery
outgrows it.

Several processes may serve one gallery: one writer (it compacts and snapshots) and
any number opened ``read_only``, which write nothing, follow the records like the
writer and take up the writer's rebuilt indexes from its snapshots.

Each write is one database transaction, so a photo and its captions appear together or
not at all, and costs the same whatever the gallery's size; the FAISS indexes then read
what was committed after their watermark (``refresh``), which is also how a process
sees another's writes (``follow`` does it every second in a background thread). An
uploaded photo's file is written (and synced) before its transaction and deleted after
its removal's; files no record names are cleared when a writer opens the gallery.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from groundsearch.files import atomic_path, sha256_file
from groundsearch.index.errors import IdentityMismatch, StoreError, UnknownItemError
from groundsearch.index.index_kinds import AUTO, KINDS, IndexSettings, choose_kind
from groundsearch.index.records import DB_FILE, Records, blob
from groundsearch.index.vectors import VectorIndex, as_matrix, clear_leftovers

__all__ = [
    "CaptionRecord",
    "Gallery",
    "IdentityMismatch",
    "ImageRecord",
    "IndexedFile",
    "StoreError",
    "UnknownItemError",
    "checkpoint_identity",
]

log = logging.getLogger("groundsearch.index")
INDEX_DIR, UPLOADS = "index", "uploads"
UPLOADS_LOCK = "uploads.lock"
#: The search indexes, by the name the records use.
VECTOR_KINDS = ("images", "captions")
#: Compact (rebuild) a search index once removed vectors are this share of it…
COMPACT_SHARE = 0.2
#: … and at least this many.
COMPACT_MIN = 1000
#: Snapshot the search indexes after this many changes since the last snapshot.
SNAPSHOT_EVERY = 20_000
#: The old layout (two ``VectorStore`` folders), refused with what to run.
LEGACY_MARKERS = ("images/meta.json", "captions/meta.json")


@dataclass(frozen=True)
class ImageRecord:
    """A gallery photo: its file, whether it was uploaded, its captions' texts."""

    id: int
    path: str
    sha256: str
    uploaded: bool = False
    captions: tuple[str, ...] = ()

    @property
    def file(self) -> str:
        """The photo's file name."""
        return Path(self.path).name


@dataclass(frozen=True)
class CaptionRecord:
    """A gallery caption and the photo it describes."""

    id: int
    text: str
    image_id: int


@dataclass
class IndexedFile:
    """A photo file to record: where it is, its state, its content's hash; its vector
    (None when that content is already in the gallery) and its captions with vectors."""

    path: str
    size: int
    mtime_ns: int
    sha256: str
    vector: np.ndarray | None = None
    captions: Sequence[str] = ()
    caption_vectors: np.ndarray | None = None


@dataclass
class Added:
    """What one ``add_files`` call changed."""

    photos: int = 0
    files: int = 0
    captions: int = 0
    replaced: int = 0
    photo_ids: list[int] = field(default_factory=list)


def checkpoint_identity(checkpoint: Path) -> dict[str, str]:
    """What a gallery's vectors depend on: the checkpoint's bytes."""
    try:
        return {"checkpoint_sha256": sha256_file(checkpoint)}
    except OSError as exc:
        raise StoreError(f"cannot read checkpoint {checkpoint}: {exc.strerror}") from None


def is_gallery(folder: Path) -> bool:
    """Whether ``folder`` holds a gallery database."""
    return (Path(folder) / DB_FILE).is_file()


def is_legacy_gallery(folder: Path) -> bool:
    """Whether ``folder`` holds a gallery in the format before the database."""
    return not is_gallery(folder) and any((Path(folder) / m).is_file() for m in LEGACY_MARKERS)


class Gallery:
    """Photos and captions in ``folder``, searchable by inner product."""

    def __init__(
        self,
        folder: Path,
        records: Records,
        read_only: bool = False,
        settings: IndexSettings | None = None,
    ) -> None:
        self.folder, self.records, self.read_only = Path(folder), records, read_only
        meta = records.meta
        self.dim, self.kind = int(meta["dim"]), str(meta["kind"])
        self.identity: dict[str, str] = meta["identity"]
        #: the approximate kinds' shape and this process's search settings
        self.settings = settings or IndexSettings()
        self._snapshot_seen: dict[str, int] = {}
        self._indexes = {kind: self._load_index(kind) for kind in VECTOR_KINDS}
        self._refresh_lock = threading.Lock()
        self._changes = 0
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        self.refresh()

    # --- opening ----------------------------------------------------------------------------

    @classmethod
    def create(cls, folder: Path, dim: int, identity: dict[str, str], kind: str = AUTO) -> Gallery:
        """A new, empty gallery in ``folder`` (``kind``: one of ``KINDS`` or ``auto``)."""
        if kind not in (AUTO, *KINDS):
            raise ValueError(f"kind must be one of {(AUTO, *KINDS)}, got {kind!r}")
        folder = Path(folder)
        _refuse_legacy(folder)
        return cls(folder, Records.create(folder / DB_FILE, dim, kind, identity))

    @classmethod
    def open(
        cls,
        folder: Path,
        identity: dict[str, str] | None = None,
        read_only: bool = False,
        settings: IndexSettings | None = None,
    ) -> Gallery:
        """A gallery; StoreError (IdentityMismatch) if there is none or another model
        built it. Leftovers of interrupted writes are cleared (unless ``read_only``).
        ``settings``: the approximate kinds' search settings for this process."""
        folder = Path(folder)
        _refuse_legacy(folder)
        if not is_gallery(folder):
            raise StoreError(
                f"no gallery at {folder} (make one with `groundsearch index PHOTOS "
                f"--index {folder}`)"
            )
        gallery = cls(folder, Records.open(folder / DB_FILE, identity), read_only, settings)
        if not read_only:
            gallery.clear_leftovers()
        return gallery

    @classmethod
    def open_or_create(
        cls, folder: Path, dim: int, identity: dict[str, str], kind: str = AUTO
    ) -> Gallery:
        folder = Path(folder)
        if is_gallery(folder):
            return cls.open(folder, identity)
        return cls.create(folder, dim, identity, kind)

    def _header(self, kind: str) -> dict[str, object]:
        return {
            "identity": self.identity,
            "dim": self.dim,
            "gallery_kind": self.kind,
            "table": kind,
        }

    def _load_index(self, kind: str) -> VectorIndex:
        stem = self.folder / INDEX_DIR / kind
        self._snapshot_seen[kind] = _mtime(stem.with_suffix(".json"))
        index = VectorIndex.load(stem, self._header(kind))
        if index is not None:
            index.settings = self.settings  # this process's search settings, not the writer's
            with self.records.snapshot() as db:
                stale = index.last_id > Records.last_id(db, kind) or (
                    index.last_removal > Records.last_removal(db)
                )
            if not stale:
                return index
            log.warning("the %s snapshot is newer than the records: rebuilding it", kind)
        return self._build_index(kind)

    def _kind_for(self, n: int, current: str | None = None) -> str:
        """The index kind for ``n`` vectors: the gallery's, or by size when ``auto`` (a
        smaller kind only once the gallery has shrunk to half its threshold)."""
        if self.kind != AUTO:
            return self.kind
        wanted = choose_kind(n)
        if current is not None and KINDS.index(wanted) < KINDS.index(current):
            return current if KINDS.index(choose_kind(2 * n)) >= KINDS.index(current) else wanted
        return wanted

    def _build_index(self, kind: str) -> VectorIndex:
        """A fresh index of every live vector (what compaction and a lost snapshot do);
        a compressed one is trained on a random sample first and written to ``index/``."""
        with self.records.snapshot() as db:
            n = Records.count(db, kind)
            chosen = self._kind_for(n)
            sample = np.empty((0, self.dim), np.float32)
            if chosen == "ivfpq":
                blobs = Records.sample_vectors(db, kind, self.settings.train_size(n))
                sample = _matrix(blobs, self.dim)
            last_removal = Records.last_removal(db)
            stem = None if self.read_only else self.folder / INDEX_DIR / kind
            index = VectorIndex.build(
                self.dim, chosen, n, sample, _chunks(db, kind, self.dim), stem, self.settings
            )
        index.last_removal = last_removal
        return index

    @contextlib.contextmanager
    def _uploads_lock(self, mode: int) -> Iterator[None]:
        """Uploads hold it shared from their file to their commit; clearing leftovers
        holds it exclusively, so it never takes a file whose record is on its way."""
        with open(self.folder / UPLOADS_LOCK, "a") as fh:
            fcntl.flock(fh, mode)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def clear_leftovers(self) -> None:
        """Delete uploaded files no photo names and temp files of interrupted writes."""
        clear_leftovers(self.folder / INDEX_DIR, VECTOR_KINDS)
        uploads = self.folder / UPLOADS
        if uploads.is_dir():
            with self._uploads_lock(fcntl.LOCK_EX):
                named = self.records.uploaded_paths()
                for path in uploads.iterdir():
                    if f"{UPLOADS}/{path.name}" not in named:
                        log.info("removing %s: no photo names it (an interrupted write)", path)
                        path.unlink(missing_ok=True)

    # --- following the records ------------------------------------------------------------------

    def refresh(self) -> int:
        """Bring the search indexes up to the committed records; returns the changes read."""
        with self._refresh_lock:
            changes = 0
            with self.records.snapshot() as db:
                since = min(index.last_removal for index in self._indexes.values())
                removals = Records.removals_after(db, since)
                for kind, index in self._indexes.items():
                    # removals first: they name ids this index held before this refresh
                    mine = [i for seq, k, i in removals if k == kind and seq > index.last_removal]
                    index.remove(mine)
                    if removals:
                        index.last_removal = max(index.last_removal, removals[-1][0])
                    ids, blobs = Records.vectors_after(db, kind, index.last_id)
                    if ids:
                        index.add(ids, _matrix(blobs, self.dim))
                    changes += len(ids) + len(mine)
            self._changes += changes
            return changes

    def follow(self, every: float = 1.0) -> None:
        """Refresh every ``every`` seconds in a background thread (other processes'
        writes appear within that time), compacting and snapshotting when due."""
        if self._follower is not None:
            return

        def loop() -> None:
            while not self._stop.wait(every):
                try:
                    self.refresh()
                    self.maintain()
                except Exception:  # a transient error must not stop following
                    log.exception("could not refresh the gallery from its records")

        self._follower = threading.Thread(target=loop, name="gallery-follow", daemon=True)
        self._follower.start()

    def maintain(self, snapshot_every: int = SNAPSHOT_EVERY) -> None:
        """Rebuild an index with many removed vectors, a large delta or the wrong kind
        for its size; snapshot after many changes. A read-only gallery instead takes up
        the writer's newer snapshots."""
        for kind, index in self._indexes.items():
            if self.read_only:
                self._take_up_snapshot(kind)
            elif (
                index.tombstones >= max(COMPACT_MIN, COMPACT_SHARE * index.total)
                or index.delta_due()
                or self._kind_for(len(index), index.kind) != index.kind
            ):
                self.compact(kind)
        if self._changes >= snapshot_every and not self.read_only:
            self.snapshot()

    def _take_up_snapshot(self, kind: str) -> None:
        """Load the writer's snapshot of ``kind`` if it changed since this process
        looked, and it is not ahead of the records this process sees."""
        stem = self.folder / INDEX_DIR / kind
        seen = _mtime(stem.with_suffix(".json"))
        if seen == self._snapshot_seen.get(kind):
            return
        self._snapshot_seen[kind] = seen
        index = VectorIndex.load(stem, self._header(kind))
        if index is None:
            return
        index.settings = self.settings
        with self._refresh_lock:
            self._indexes[kind] = index
        self.refresh()
        log.info("took up the writer's %s index: %s", kind, index.describe())

    def compact(self, kind: str) -> None:
        """Rebuild one search index without its removed vectors (searches go on meanwhile)."""
        fresh = self._build_index(kind)
        with self._refresh_lock:
            self._indexes[kind] = fresh
        self.refresh()
        if fresh.sealed:  # name the new main in a snapshot now (other processes load it)
            self.snapshot()
        log.info("rebuilt the %s index: %d vectors, %s", kind, len(fresh), fresh.describe())

    def snapshot(self) -> None:
        """Write both search indexes to ``index/`` (a later open reads them, not the DB)."""
        if self.read_only:
            return
        self._changes = 0
        for kind, index in self._indexes.items():
            index.save(self.folder / INDEX_DIR / kind, self._header(kind))

    def close(self, snapshot: bool = True) -> None:
        """Stop following; write snapshots if anything changed since the last."""
        self._stop.set()
        if self._follower is not None:
            self._follower.join(timeout=10)
        fresh = self._changes or not (self.folder / INDEX_DIR / "images.json").exists()
        if snapshot and fresh and not self.read_only:
            try:
                self.snapshot()
            except OSError as exc:  # a read-only gallery: the next start rebuilds
                log.warning("could not snapshot the search indexes: %s", exc)
        self.records.close()

    # --- reading ----------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        return {kind: len(index) for kind, index in self._indexes.items()}

    def index_kinds(self) -> dict[str, str]:
        """What each search index is now, e.g. ``IVF1024,PQ64,Refine(SQfp16) + 12 exact``."""
        return {kind: index.describe() for kind, index in self._indexes.items()}

    def _image_records(self, ids: Sequence[int]) -> dict[int, ImageRecord]:
        photos = self.records.photos(ids)
        texts = self.records.caption_texts(list(photos))
        return {
            i: ImageRecord(i, path, sha, up, tuple(t for _, t in texts.get(i, ())))
            for i, (path, sha, up) in photos.items()
        }

    def image(self, image_id: int) -> ImageRecord:
        """The photo's record; UnknownItemError if there is none."""
        record = self._image_records([image_id]).get(image_id)
        if record is None:
            raise UnknownItemError(f"no image with id {image_id} in the gallery")
        return record

    def image_ids(self) -> list[int]:
        """Every photo's id, oldest first."""
        return [r[0] for r in self.records.reader().execute("SELECT id FROM photos ORDER BY id")]

    def caption(self, caption_id: int) -> CaptionRecord:
        found = self.records.captions([caption_id]).get(caption_id)
        if found is None:
            raise UnknownItemError(f"no caption with id {caption_id} in the gallery")
        return CaptionRecord(caption_id, *found)

    def captions_of(self, image_id: int) -> list[CaptionRecord]:
        """The captions of a photo (an index lookup)."""
        rows = self.records.caption_texts([image_id]).get(image_id, [])
        return [CaptionRecord(cid, text, image_id) for cid, text in rows]

    def image_vector(self, image_id: int) -> np.ndarray:
        vector = self.records.vector("images", image_id)
        if vector is None:
            raise UnknownItemError(f"no image with id {image_id} in the gallery")
        return vector

    def photo_path(self, image_id: int) -> Path:
        """The photo's file; UnknownItemError if the item is gone or none of its files
        is on disk any more."""
        record = self.image(image_id)
        if record.uploaded:
            candidates = [self.folder / record.path]
        else:
            candidates = [Path(p) for p in [record.path, *self.records.other_files(image_id)]]
        for path in candidates:
            if path.is_file():
                return path
        raise UnknownItemError(f"the photo of image {image_id} is no longer on disk")

    def search_images(self, query: np.ndarray, k: int) -> list[tuple[ImageRecord, float]]:
        """The ``k`` photos with the largest inner product with ``query`` (one vector)."""
        hits = self._indexes["images"].search(as_matrix(query, self.dim, "query"), k)[0]
        records = self._image_records([i for i, _ in hits])
        return [(records[i], score) for i, score in hits if i in records]

    def search_captions(self, query: np.ndarray, k: int) -> list[tuple[CaptionRecord, float]]:
        hits = self._indexes["captions"].search(as_matrix(query, self.dim, "query"), k)[0]
        found = self.records.captions([i for i, _ in hits])
        return [(CaptionRecord(i, *found[i]), s) for i, s in hits if i in found]

    def similar_images(self, image_id: int, k: int) -> list[tuple[ImageRecord, float]]:
        """The ``k`` photos nearest to a gallery photo, itself left out."""
        hits = self.search_images(self.image_vector(image_id), k + 1)
        return [h for h in hits if h[0].id != image_id][:k]

    # --- writing ----------------------------------------------------------------------------

    def add_photo(
        self,
        data: bytes,
        extension: str,
        vector: np.ndarray,
        captions: Sequence[str] = (),
        caption_vectors: np.ndarray | None = None,
    ) -> tuple[int, list[int], bool]:
        """Keep an uploaded photo in ``uploads/`` and add it with its captions in one
        transaction, durable when it returns. A photo already in the gallery (same
        bytes) is not stored twice: its new captions are added to it. Returns the image
        id, the new caption ids and whether the photo was new."""
        sha = hashlib.sha256(data).hexdigest()
        file = f"{UPLOADS}/{sha}.{extension}"
        vec = as_matrix(vector, self.dim, "vector")
        rows = _caption_rows(captions, caption_vectors, self.dim)
        path = self.folder / file
        with self._uploads_lock(fcntl.LOCK_SH), self.records.transaction() as db:
            found = db.execute("SELECT id FROM photos WHERE sha256 = ?", (sha,)).fetchone()
            if found is None:
                if not path.exists():  # the file before its record
                    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
                        fh.write(data)
                        fh.flush()
                        os.fsync(fh.fileno())
                cur = db.execute(
                    "INSERT INTO photos (sha256, path, uploaded, vector) VALUES (?, ?, 1, ?)",
                    (sha, file, blob(vec[0])),
                )
                image_id, new = int(cur.lastrowid or 0), True
            else:
                image_id, new = int(found[0]), False
            caption_ids = _insert_captions(db, image_id, rows)
        self.refresh()
        return image_id, caption_ids, new

    def remove_photo(self, image_id: int) -> int:
        """Remove a photo with its captions (and its file, if uploaded) in one
        transaction, durable when it returns; returns how many captions went."""
        with self.records.transaction() as db:
            row = db.execute(
                "SELECT path, uploaded FROM photos WHERE id = ?", (image_id,)
            ).fetchone()
            if row is None:
                raise UnknownItemError(f"no image with id {image_id} in the gallery")
            count = db.execute(
                "SELECT count(*) FROM captions WHERE photo_id = ?", (image_id,)
            ).fetchone()[0]
            db.execute("DELETE FROM photos WHERE id = ?", (image_id,))
        if row[1]:  # unless the same bytes were uploaded again since the commit
            with self._uploads_lock(fcntl.LOCK_EX):
                if not self.records.holds_upload(row[0]):
                    (self.folder / row[0]).unlink(missing_ok=True)
        self.refresh()
        return int(count)

    def add_files(self, files: Sequence[IndexedFile], run: int = 0) -> Added:
        """Record indexed photo files (and their captions) in one transaction.

        A file's content already in the gallery is recorded as another file of that
        photo; a file whose content changed moves to its new photo, and a photo left
        with no file (and not uploaded) is removed. ``run`` marks the files as seen by
        that indexing run (see ``forget_unseen``).
        """
        added = Added()
        with self.records.transaction() as db:
            for item in files:
                found = db.execute(
                    "SELECT id FROM photos WHERE sha256 = ?", (item.sha256,)
                ).fetchone()
                if found is None:
                    if item.vector is None:
                        raise ValueError(f"{item.path}: a new photo needs its vector")
                    cur = db.execute(
                        "INSERT INTO photos (sha256, path, vector) VALUES (?, ?, ?)",
                        (item.sha256, item.path, blob(as_matrix(item.vector, self.dim)[0])),
                    )
                    photo_id = int(cur.lastrowid or 0)
                    added.photos += 1
                else:
                    photo_id = int(found[0])
                before = db.execute(
                    "SELECT photo_id FROM files WHERE path = ?", (item.path,)
                ).fetchone()
                db.execute(
                    "INSERT INTO files (path, photo_id, size, mtime_ns, seen_run) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET "
                    "photo_id = excluded.photo_id, size = excluded.size, "
                    "mtime_ns = excluded.mtime_ns, seen_run = excluded.seen_run",
                    (item.path, photo_id, item.size, item.mtime_ns, run),
                )
                if before is None:
                    added.files += 1
                elif before[0] != photo_id:
                    added.replaced += _drop_if_orphan(db, int(before[0]))
                rows = _caption_rows(item.captions, item.caption_vectors, self.dim)
                added.captions += len(_insert_captions(db, photo_id, rows))
                added.photo_ids.append(photo_id)
        self.refresh()
        return added

    def mark_seen(self, paths: Sequence[str], run: int) -> None:
        """Record that an indexing run found these (unchanged) files."""
        with self.records.transaction() as db:
            db.executemany(
                "UPDATE files SET seen_run = ? WHERE path = ?", [(run, p) for p in paths]
            )

    def forget_unseen(self, roots: Sequence[str], run: int) -> int:
        """Files under ``roots`` that run ``run`` did not find are gone: forget them, and
        remove photos left with no file. Returns the photos removed."""
        removed = 0
        with self.records.transaction() as db:
            for root in roots:
                prefix = root.rstrip("/") + "/"
                db.execute(
                    "DELETE FROM files WHERE seen_run <> ? AND (path = ? OR "
                    "substr(path, 1, ?) = ?)",
                    (run, root, len(prefix), prefix),
                )
            cur = db.execute(
                "DELETE FROM photos WHERE uploaded = 0 AND NOT EXISTS "
                "(SELECT 1 FROM files WHERE files.photo_id = photos.id)"
            )
            removed = cur.rowcount
            _repoint_photos(db)
        self.refresh()
        return removed

    def has_files_under(self, folder: Path) -> bool:
        """Whether any indexed file lies under ``folder``."""
        prefix = str(folder).rstrip("/") + "/"
        sql = "SELECT 1 FROM files WHERE substr(path, 1, ?) = ? LIMIT 1"
        return self.records.reader().execute(sql, (len(prefix), prefix)).fetchone() is not None

    def next_run(self) -> int:
        """A number for a new indexing run (larger than every run before)."""
        row = self.records.reader().execute("SELECT max(seen_run) FROM files").fetchone()
        return int(row[0] or 0) + 1


def _refuse_legacy(folder: Path) -> None:
    if is_legacy_gallery(folder):
        raise StoreError(
            f"{folder} holds a gallery in the old format (two FAISS folders, no gallery.db); "
            f"run `groundsearch index --index {folder} --migrate` to move it into the "
            f"database, or index its photos into a new folder"
        )


def _caption_rows(
    captions: Sequence[str], vectors: np.ndarray | None, dim: int
) -> list[tuple[str, bytes]]:
    if not captions:
        return []
    if vectors is None:
        raise ValueError("captions were given without their vectors")
    matrix = as_matrix(vectors, dim, "caption vectors")
    if matrix.shape[0] != len(captions):
        raise ValueError(f"{len(captions)} captions but {matrix.shape[0]} caption vectors")
    return [(text, blob(v)) for text, v in zip(captions, matrix, strict=True)]


def _insert_captions(
    db: sqlite3.Connection, photo_id: int, rows: Sequence[tuple[str, bytes]]
) -> list[int]:
    """Insert captions a photo does not have yet; returns the new ids."""
    ids = []
    for text, vec in rows:
        cur = db.execute(
            "INSERT OR IGNORE INTO captions (photo_id, text, vector) VALUES (?, ?, ?)",
            (photo_id, text, vec),
        )
        if cur.rowcount:
            ids.append(int(cur.lastrowid or 0))
    return ids


def _drop_if_orphan(db: sqlite3.Connection, photo_id: int) -> int:
    """Remove an indexed photo no file holds any more; 1 if it was removed."""
    cur = db.execute(
        "DELETE FROM photos WHERE id = ? AND uploaded = 0 AND NOT EXISTS "
        "(SELECT 1 FROM files WHERE photo_id = ?)",
        (photo_id, photo_id),
    )
    _repoint_photos(db, photo_id)
    return cur.rowcount


def _repoint_photos(db: sqlite3.Connection, photo_id: int | None = None) -> None:
    """A photo whose recorded path is no longer one of its files takes another of them."""
    where = "AND id = ?" if photo_id is not None else ""
    db.execute(
        "UPDATE photos SET path = (SELECT path FROM files WHERE files.photo_id = photos.id "
        "ORDER BY rowid LIMIT 1) WHERE uploaded = 0 AND NOT EXISTS (SELECT 1 FROM files "
        f"WHERE files.path = photos.path AND files.photo_id = photos.id) {where}",
        (photo_id,) if photo_id is not None else (),
    )


def _matrix(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    return np.frombuffer(b"".join(blobs), np.float32).reshape(-1, dim)


def _chunks(db: sqlite3.Connection, kind: str, dim: int) -> Iterator[tuple[list[int], np.ndarray]]:
    """Every vector of ``kind`` in id order, 50,000 at a time."""
    after = 0
    while True:
        ids, blobs = Records.vectors_after(db, kind, after, limit=50_000)
        if not ids:
            return
        yield ids, _matrix(blobs, dim)
        after = ids[-1]


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0
