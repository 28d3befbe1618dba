"""The in-place migration of a format-2 gallery's records to format 3 (photo metadata):
time and peak memory at 1M photos (issue 26, item 1).

    python bench/migrate_metadata.py [--photos 1000000] [--work runs/migrate] [--keep]
    python bench/migrate_metadata.py --backfill

1. **The old gallery.** A format-2 ``gallery.db`` made with format 2's schema text
   (``tests/index/format2.py``, verbatim) and ``executemany`` in transactions of 50,000:
   ``--photos`` photos with 640-d float32 vectors (the shipped model's size; unit-length
   Gaussian vectors from a seeded pool of 50,000, cycled: their values do not matter to
   the migration), a SHA-256 and a path in one of 1,000 folders each, and one ``files``
   row per photo, as ``groundsearch index`` leaves them; WAL mode, as a gallery is.
2. **The migration**, in a fresh process: ``Records.open`` — what a writer's
   ``Gallery.open`` runs — timed, with the process's RSS before it and its peak RSS
   during it (``VmHWM``, reset just before through ``/proc/self/clear_refs``; not
   ``ru_maxrss``, which Linux carries over from the parent across fork and exec); then
   checks: format 3, every photo there,
   the vectors of 1,000 random photos byte-identical to what was written.
3. **The backfill's write**: ``fill_metadata`` for 10,000 photos in one transaction (what
   an indexing run over a migrated gallery does beside reading the files), photos/s.
4. **The backfill, end to end** (``--backfill``): a format-2 gallery whose photos are the
   8,091 real Flickr8k files (their real sizes and mtimes in ``files``, so every file is
   unchanged; vectors from the pool), then ``index_photos`` over the folder as
   ``groundsearch index`` runs it (one CNN worker): the run that migrates and backfills,
   then a second run with nothing left to fill (the walk and the unchanged-file checks
   alone); their difference per photo is the backfill's own cost.

The database is built in the page cache of a machine with enough RAM to hold it (the
migration then reads it from memory; a cold disk adds its read time). Prints one JSON
object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import unit_vectors

DIM = 640
POOL = 50_000
CHUNK = 50_000
ID = {"bench": "migrate_metadata"}


def vector_pool(seed: int = 26) -> np.ndarray:
    """The ``POOL`` unit vectors the photos' vectors cycle through."""
    return unit_vectors(np.random.default_rng(seed), POOL, DIM)


def build(path: Path, n: int) -> dict[str, float]:
    """A format-2 database of ``n`` photos (and their files) at ``path``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.index.format2 import create_format2

    start = time.perf_counter()
    create_format2(path, DIM, ID)
    pool = vector_pool()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA synchronous = OFF")  # a bulk build: its durability is not measured
    for lo in range(0, n, CHUNK):
        ids = range(lo + 1, min(lo + CHUNK, n) + 1)
        photos = [
            (
                i,
                hashlib.sha256(i.to_bytes(8, "little")).hexdigest(),
                f"/home/user/Photos/{i % 1000:03d}/IMG_{i:07d}.jpg",
                pool[i % POOL].tobytes(),
            )
            for i in ids
        ]
        db.execute("BEGIN")
        db.executemany(
            "INSERT INTO photos (id, sha256, path, uploaded, vector) VALUES (?, ?, ?, 0, ?)",
            photos,
        )
        db.executemany(
            "INSERT INTO files (path, photo_id, size, mtime_ns, seen_run) VALUES (?, ?, ?, ?, 1)",
            [(p[2], p[0], 2_000_000 + p[0], 1_700_000_000 * 10**9 + p[0]) for p in photos],
        )
        db.execute("COMMIT")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return {"seconds": round(time.perf_counter() - start, 1)}


def status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(field)


def migrate(path: str, n: int) -> None:
    """The child process: open (migrate) the records, time it, check them."""
    from groundsearch.index.store import records
    from groundsearch.index.store.photo_metadata import PhotoMetadata
    from groundsearch.index.store.records import Records

    rss_before = status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again here
    start = time.perf_counter()
    store = Records.open(Path(path), ID)
    seconds = time.perf_counter() - start
    peak = status_mb("VmHWM")
    pool = vector_pool()  # after the measurement: the check's own memory
    db = store.reader()
    ids = np.random.default_rng(1).choice(n, size=min(1000, n), replace=False) + 1
    same = all(
        records.vector(db, "images", int(i)).tobytes() == pool[int(i) % POOL].tobytes() for i in ids
    )
    columns = [r[1] for r in db.execute("PRAGMA table_info(photos)")]
    meta = PhotoMetadata(
        taken_at=1.7e9, taken="2023-11-14T22:13:20", taken_source="exif", camera="Apple iPhone 12"
    )
    fill = np.arange(1, min(10_000, n) + 1)  # the first 10,000 photos
    t0 = time.perf_counter()
    with store.transaction() as tx:
        filled = sum(records.fill_metadata(tx, int(i), meta) for i in fill)
    fill_seconds = time.perf_counter() - t0
    out = {
        "migration_seconds": round(seconds, 2),
        "rss_mb_before_open": round(rss_before, 1),
        "peak_rss_mb_during_migration": round(peak, 1),
        "format": store.meta["format"],
        "photos": records.count(db, "images"),
        "columns": columns,
        "1000_random_vectors_byte_identical": same,
        "backfill_write": {
            "photos": filled,
            "seconds": round(fill_seconds, 2),
            "photos_per_second": round(filled / fill_seconds),
        },
    }
    store.close()
    print(json.dumps(out))


def backfill(work: Path) -> dict[str, object]:
    """``groundsearch index`` over a migrated gallery of the real Flickr8k files."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from groundsearch.common.settings import get_settings
    from groundsearch.index.ingest.indexer import index_photos
    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.parsing import Parser
    from tests.index.format2 import create_format2

    s = get_settings()
    folder = s.flickr8k_dir / "Images"
    photos = sorted(p for p in folder.iterdir() if p.suffix == ".jpg")
    gallery = work / "backfill"
    gallery.mkdir(parents=True)
    create_format2(gallery / "gallery.db", DIM, checkpoint_identity(s.default_checkpoint))
    pool = vector_pool()
    db = sqlite3.connect(gallery / "gallery.db", isolation_level=None)
    db.execute("BEGIN")
    for i, p in enumerate(photos, 1):
        st = p.stat()
        db.execute(
            "INSERT INTO photos (id, sha256, path, uploaded, vector) VALUES (?, ?, ?, 0, ?)",
            (i, f"sha-{i}", str(p), pool[i % POOL].tobytes()),
        )
        db.execute(
            "INSERT INTO files VALUES (?, ?, ?, ?, 1)", (str(p), i, st.st_size, st.st_mtime_ns)
        )
    db.execute("COMMIT")
    db.close()
    parser = Parser(s.parser_dir, s.cache_dir)
    runs = []
    for _ in range(2):
        start = time.perf_counter()
        report = index_photos([folder], gallery, s.default_checkpoint, parser, workers=1)
        runs.append(
            {
                "seconds": round(time.perf_counter() - start, 2),
                "unchanged": report.unchanged,
                "embedded": report.embedded,
                "backfilled": report.backfilled,
            }
        )
    own = (runs[0]["seconds"] - runs[1]["seconds"]) / len(photos)  # type: ignore[operator]
    return {
        "photos": len(photos),
        "run that migrates and backfills": runs[0],
        "run with nothing to fill": runs[1],
        "backfill ms per photo (difference)": round(1000 * own, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--photos", type=int, default=1_000_000)
    ap.add_argument("--work", type=Path, default=Path("runs/migrate"))
    ap.add_argument("--keep", action="store_true", help="keep the database afterwards")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument(
        "--backfill", action="store_true", help="only part 4: the backfill over Flickr8k"
    )
    args = ap.parse_args()
    if args.child:
        migrate(args.child, args.photos)
        return
    if args.backfill:
        shutil.rmtree(args.work / "backfill", ignore_errors=True)
        result = backfill(args.work)
        if not args.keep:
            shutil.rmtree(args.work / "backfill")
        print(json.dumps(result, indent=1))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    path = args.work / "gallery.db"
    for leftover in args.work.glob("gallery.db*"):
        leftover.unlink()
    result: dict[str, object] = {
        "machine": f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start",
        "sqlite": sqlite3.sqlite_version,
        "photos": args.photos,
    }
    result["build"] = build(path, args.photos)
    result["database_mb_format2"] = round(path.stat().st_size / 2**20)
    child = subprocess.run(
        [sys.executable, __file__, "--photos", str(args.photos), "--child", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    result["migration"] = json.loads(child.stdout)
    result["database_mb_format3"] = round(path.stat().st_size / 2**20)
    result["load average at the end"] = round(os.getloadavg()[0], 2)
    if not args.keep:
        shutil.rmtree(args.work)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
