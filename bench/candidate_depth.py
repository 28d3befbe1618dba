"""How many candidates must a re-rank read? A probe of a saved scale index, for docs/BENCHMARKS.md.

A re-rank store can only restore the exact top 10 if the index's own ranking brings them
among the candidates it reads. For an index ``bench/scale.py`` built and saved (its
``queries.npy`` and ``exact.npy`` beside it), this loads it as a server does and prints,
for each nprobe, the share of each query's exact top 10 found among the index's best
``depth`` hits, for depths from 10 to 4,000 — and first what one cold random read of a
re-rank record costs on this disk: ``--cold-reads`` reads of 690 bytes at random offsets
of the folder's largest file, after asking the kernel to drop its cached pages, one after
another, then (other offsets, dropped again each time) through a mapping by 1, 4, 16, 32 and
64 of ``mapped_files.gather``'s readers, as a compressed index reads a store larger than
memory (32):

    python bench/candidate_depth.py runs/scale/work100m/100000000-ivfopq --queries 100

With ``--base`` (the gallery ``bench/scale.py`` drew its vectors from), it also answers
what a re-rank store would make of those candidates, were it on disk: it regenerates the
synthetic vectors of every query's best 2,000 candidates (the whole gallery is generated
again, by ``--workers`` processes, and only those rows kept), codes them as a float16 and
an SQ8 store would (the SQ8 codec trained on the gallery's first 200,000 vectors), and
prints recall@10 against the exact answers when the best 1,000 or 2,000 are re-ranked:

    python bench/candidate_depth.py runs/scale/work100m/100000000-ivfopq --queries 300 \
        --nprobe 16 --base /tmp/g8k
"""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import sys
import time
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from scale import CHUNK, HEADER, SyntheticChunks, load_base, noise_scale

from groundsearch.index.search.mapped_files import READERS, advise_random, gather
from groundsearch.index.search.vectors import VectorIndex

DEPTHS = (10, 100, 300, 1000, 2000, 4000)
RERANK_DEPTHS = (1000, 2000)
RECORD = 690  # an SQ8 re-rank record of the scale gallery's 690-d vectors


def cold_reads(folder: Path, n: int) -> None:
    """Time ``n`` random reads of a record from the folder's largest file, uncached."""
    path = max(folder.iterdir(), key=lambda p: p.stat().st_size)
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        offsets = np.random.default_rng(0).integers(0, size - RECORD, n)
        t0 = time.perf_counter()
        for offset in offsets:
            os.pread(fd, RECORD, int(offset))
        seconds = time.perf_counter() - t0
    finally:
        os.close(fd)
    print(
        f"{n} cold random reads of {RECORD} B from {path.name} ({size / 2**30:.1f} GiB): "
        f"{seconds * 1000:.0f} ms, {seconds / n * 1e6:.0f} µs each"
    )
    rows = np.memmap(path, np.uint8, "r", shape=(size // RECORD, RECORD))
    advise_random(path)  # as a compressed index maps its store: no read-ahead
    for readers in sorted({1, 4, 16, READERS, 2 * READERS}):
        os.posix_fadvise(fd := os.open(path, os.O_RDONLY), 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
        pos = np.random.default_rng(readers).integers(0, rows.shape[0], n)
        t0 = time.perf_counter()
        gather(rows, pos, readers)
        seconds = time.perf_counter() - t0
        print(f"  the same through a mapping, {readers} reader(s): {seconds * 1000:.0f} ms")


_GALLERY: dict[str, object] = {}  # what the forked workers read: the base, tau, the rows


def _regenerate(span: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The wanted rows among rows ``span`` of the synthetic gallery, and their vectors."""
    base, tau, wanted = _GALLERY["base"], _GALLERY["tau"], _GALLERY["wanted"]
    rows_out, vecs_out = [], []
    for ids, x in SyntheticChunks(base, span[1], float(tau), span[0]):  # type: ignore[arg-type]
        rows = np.asarray(ids, np.int64) - 1
        keep = np.isin(rows, wanted, assume_unique=True)  # type: ignore[arg-type]
        rows_out.append(rows[keep])
        vecs_out.append(x[keep])
    return np.concatenate(rows_out), np.concatenate(vecs_out)


def rerank_recall(
    index: VectorIndex, queries: np.ndarray, exact: np.ndarray, base_path: Path, workers: int
) -> None:
    """Recall@10 when the index's best 1,000 / 2,000 are re-ranked from a float16 or an
    SQ8 store of the regenerated vectors (see the module)."""
    t0 = time.perf_counter()
    cand = np.array([[i for i, _ in index.search(q, max(RERANK_DEPTHS))[0]] for q in queries])
    base, _ = load_base(base_path)
    tau = noise_scale(base)
    n = len(index)
    _GALLERY.update(base=base, tau=tau, wanted=np.unique(cand - 1))
    edges = np.linspace(0, n // CHUNK, workers * 8 + 1).astype(int) * CHUNK
    edges[-1] = n
    spans = [(int(a), int(b)) for a, b in itertools.pairwise(edges) if b > a]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        parts = pool.map(_regenerate, spans)
    rows = np.concatenate([p[0] for p in parts])
    vectors = np.concatenate([p[1] for p in parts])
    order = np.argsort(rows)
    rows, vectors = rows[order], vectors[order]
    sample = np.concatenate([x for _, x in SyntheticChunks(base, 200_000, tau)])
    sq8 = faiss.ScalarQuantizer(vectors.shape[1], faiss.ScalarQuantizer.QT_8bit)
    sq8.train(sample)
    stores = {
        "float16": vectors.astype(np.float16).astype(np.float32),
        "SQ8": sq8.decode(sq8.compute_codes(vectors)),
    }
    print(
        f"{len(rows):,} candidate vectors regenerated from {n:,} in "
        f"{time.perf_counter() - t0:.0f} s; recall@10 re-ranked from a store:"
    )
    for name, store in stores.items():
        for depth in RERANK_DEPTHS:
            found = []
            for q, ids, truth in zip(queries, cand, exact, strict=True):
                top = ids[:depth]
                at = np.searchsorted(rows, top - 1)
                best = top[np.argsort(-(store[at] @ q), kind="stable")[:10]]
                found.append(len(set(best.tolist()) & set(truth.tolist())) / 10)
            print(f"  {name} store, the best {depth:,} re-ranked: {np.mean(found):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="a size-kind folder of bench/scale.py's --work")
    ap.add_argument("--queries", type=int, default=100, help="the first this many (0: none)")
    ap.add_argument("--nprobe", default="16,64")
    ap.add_argument("--cold-reads", type=int, default=2000)
    ap.add_argument("--base", type=Path, help="re-rank from regenerated vectors (the module)")
    ap.add_argument("--workers", type=int, default=2, help="processes regenerating them")
    args = ap.parse_args()
    if args.cold_reads:  # first: the search below maps the files and pages them in
        cold_reads(args.folder, args.cold_reads)
    if not args.queries:
        return
    faiss.omp_set_num_threads(1)
    queries = np.load(args.folder / "queries.npy")[: args.queries]
    exact = np.load(args.folder / "exact.npy")[: args.queries]
    index = VectorIndex.load(args.folder / "images", HEADER)
    if index is None:
        raise SystemExit(f"{args.folder}: no saved index")
    print(f"{index.describe()}; {len(queries)} queries; share of the exact top 10 within depth")
    for nprobe in (int(n) for n in args.nprobe.split(",")):
        index.settings.nprobe = nprobe
        found = {depth: [] for depth in DEPTHS}
        t0 = time.perf_counter()
        for q, truth in zip(queries, exact, strict=True):
            ids = [i for i, _ in index.search(q, max(DEPTHS))[0]]
            for depth in DEPTHS:
                found[depth].append(len(set(ids[:depth]) & set(truth.tolist())) / 10)
        shares = ", ".join(f"{d}: {np.mean(v):.3f}" for d, v in found.items())
        print(f"nprobe {nprobe}: {shares} ({time.perf_counter() - t0:.0f} s)")
    if args.base:  # at the last nprobe
        rerank_recall(index, queries, exact, args.base, args.workers)


if __name__ == "__main__":
    main()
