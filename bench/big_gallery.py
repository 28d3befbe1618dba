"""A gallery of 100,000 photos for the service's benches: a real gallery's photos and
near-copies of them.

    python bench/big_gallery.py --source GALLERY --out DIR [--size 100000]
    python bench/search_latency.py --index DIR          # /search on it from a client

GALLERY is a gallery the served model built (`groundsearch index --flickr8k --index
GALLERY`: the 1,000 Flickr8k test photos, their captions and stored classes). Its
database is copied to DIR, then ``size`` − N photos are added through
``records.insert_photo``: photo ``j`` is real photo ``j mod N``'s vector plus Gaussian
noise of the size of real nearest-neighbour gaps (``scale.noise_scale`` on the unit
vectors; each copy keeps its base's norm: the open-vocabulary channel makes it ~1.2),
with the base photo's stored classes (so relevance reads real evidence for it) and a
path of its own (no file on disk: a search reads records, never the photos). The copies
have no captions. The search index is built from the records when the gallery is first
opened (``auto``: flat at this size), as for any gallery without a snapshot.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import scale

from groundsearch.index.store import records
from groundsearch.index.store.records import DB_FILE, Records

CHUNK = 5_000


def base_photos(db: sqlite3.Connection) -> tuple[list[int], np.ndarray]:
    """The real photos' ids and vectors, in id order."""
    ids = records.photo_ids(db)
    found = records.vectors_of(db, "images", ids)
    return ids, np.stack([found[i] for i in ids]).astype(np.float32)


def build(source: Path, out: Path, size: int, seed: int) -> dict[str, float | int]:
    """Copy ``source``'s records to ``out`` and add the near-copies up to ``size`` photos."""
    if (out / DB_FILE).exists():
        raise SystemExit(f"{out} already holds a gallery")
    out.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{source / DB_FILE}?mode=ro", uri=True)
    dst = sqlite3.connect(out / DB_FILE)
    src.backup(dst)  # a consistent copy, WAL included
    src.close()
    dst.close()
    store = Records.open(out / DB_FILE)
    ids, base = base_photos(store.reader())
    classes = records.classes_of(store.reader(), ids)
    norms = np.linalg.norm(base, axis=1, keepdims=True)
    tau = scale.noise_scale(base / norms)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    added = 0
    while len(ids) + added < size:
        n = min(CHUNK, size - len(ids) - added)
        rows = (added + np.arange(n)) % len(ids)
        unit = base[rows] / norms[rows]
        noisy = unit + rng.normal(0, tau / np.sqrt(base.shape[1]), unit.shape).astype(np.float32)
        vectors = noisy / np.linalg.norm(noisy, axis=1, keepdims=True) * norms[rows]
        with store.transaction() as db:
            for j, (row, v) in enumerate(zip(rows.tolist(), vectors, strict=True)):
                number = len(ids) + added + j
                photo = records.insert_photo(db, f"{number:064x}", f"/copies/{number:07d}.jpg", v)
                if ids[row] in classes:
                    records.insert_classes(db, photo, *classes[ids[row]])
        added += n
        print(f"  {len(ids) + added:,} photos", file=sys.stderr, flush=True)
    store.close()
    return {
        "photos": len(ids) + added,
        "real": len(ids),
        "noise_tau": round(tau, 4),
        "insert_s": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", type=Path, required=True, help="a gallery the model built")
    ap.add_argument("--out", type=Path, required=True, help="a new folder for the gallery")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not (args.source / DB_FILE).is_file():
        ap.error(f"no gallery at {args.source}")
    print(build(args.source, args.out, args.size, args.seed))


if __name__ == "__main__":
    main()
