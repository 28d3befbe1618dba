"""What serving evidence reads per query: the stored classes of a window of hits against
their stored vectors (the reference, in the same run), on a gallery database of
synthetic photos.

    python bench/evidence_reads.py --photos 8000 --window 1000

(docs/RESULTS.md, "Everyday words".)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from groundsearch.index.store import records
from groundsearch.index.store.records import DB_FILE, Records

DIM = 690  # the shipped checkpoint's vectors (640 joint + 50 channel)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--photos", type=int, default=8000)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        store = Records.create(Path(folder) / DB_FILE, DIM, "auto", {"bench": "evidence"})
        with store.transaction() as db:
            for i in range(args.photos):
                vector = rng.standard_normal(DIM).astype(np.float32)
                photo = records.insert_photo(db, f"sha-{i}", f"/p/{i}.jpg", vector)
                probs = np.sort(rng.random(10).astype(np.float32))[::-1]
                records.insert_classes(db, photo, rng.choice(1000, 10, replace=False), probs)
        ids = [int(i) for i in rng.choice(np.arange(1, args.photos + 1), args.window, False)]
        db = store.reader()
        for name, read in (
            ("vectors (reference)", lambda: records.vectors_of(db, "images", ids)),
            ("classes", lambda: records.classes_of(db, ids)),
        ):
            read()
            times = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                read()
                times.append(time.perf_counter() - start)
            print(f"{name}: {1000 * float(np.median(times)):.2f} ms for {args.window} hits")
        store.close()


if __name__ == "__main__":
    main()
