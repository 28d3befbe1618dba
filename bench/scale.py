"""Scale benchmark: galleries of 100k, 1M and 10M vectors, for each index kind.

    .venv/bin/python bench/scale.py --base runs/scale/flickr8k-all --sizes 100000,1000000
    .venv/bin/python bench/scale.py --base … --sizes 10000000 --kinds ivfpq

**The vectors.** Every real vector of the shipped SDT-RNN there is: the 8,091 Flickr8k
photos and their 40,455 captions (640-d, unit length), read from a gallery built with
`groundsearch index --flickr8k --split '' --index runs/scale/flickr8k-all`. Synthetic
vector ``j`` is real vector ``perm[j mod N]`` (a seeded permutation) plus Gaussian noise
with standard deviation ``tau / √640`` per coordinate, renormalised, where ``tau`` is the
median distance from a real vector to its nearest real neighbour (so a synthetic vector
sits about as far from its base as real neighbours sit from each other). Chunks are
generated from a seeded RNG, so every run makes the same gallery.
**The queries.** 300 real Flickr8k test-split captions, encoded by the same model (the
captions are also among the bases, as a user's own captions would be).
**Exact answers** are computed while the gallery is generated (streamed: the top 10 of
each query over every chunk), so no kind is compared with itself.

For each size and kind, one process builds the index through the gallery's code
(``VectorIndex.build``: training on a seeded sample for ``ivfpq``, written and mapped
back) and saves its snapshot; a fresh process then loads it as a server does
(``VectorIndex.load``: ``ivfpq`` memory-mapped) and measures its RSS after loading and
after the queries, and the latency of single queries (batch 1, one FAISS thread) with
recall@10 against the exact answers (and *item recall*: the share of the real vectors the
exact top 10 are copies of that the hits are copies of too — how often the index finds
the right photo or caption when it cannot tell its synthetic near-copies apart), each
setting after one untimed pass over the queries
(a server that has answered a while: the pages they touch are in the page cache); for
``ivfpq`` over a grid of nprobe × k_factor, for ``hnsw`` of efSearch.
Each time is printed beside a reference measured in the same process: one exact
search of one query over 100,000 real-like vectors (numpy, one thread).
Output: ``runs/bench/scale.json`` (merged across runs) and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.common.settings import get_settings
from groundsearch.index.search.index_kinds import COMPRESSED, IndexSettings
from groundsearch.index.search.vectors import VectorIndex

sys.path.insert(0, str(Path(__file__).parent))
from common import exact_search_ms, latency, markdown_table, peak_rss_mb

CHUNK = 100_000
QUERIES = 300
SEED = 12
HEADER = {"identity": {"bench": "scale"}}
GRID = [(16, 8), (16, 16), (32, 16), (16, 32), (32, 32), (64, 32)]
#: ivfopq has no re-rank: its grid is nprobe only
OPQ_GRID = [(16, 1), (32, 1), (64, 1), (128, 1)]
EF_GRID = [32, 64, 128, 256]
#: the training sample is drawn from the first rows (the gallery repeats its bases every
#: 48,535 rows, so these rows hold every base ~60 times; drawing from all of 100M rows
#: would mean generating them all once more)
SAMPLE_FROM = 3_000_000
log = logging.getLogger("bench.scale")


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def rss_parts_mb() -> dict[str, int]:
    """Resident memory split into anonymous (heap) and file-backed (mapped index) pages."""
    parts = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("RssAnon:", "RssFile:")):
                parts[line.split(":")[0].lower() + "_mb"] = round(int(line.split()[1]) / 1024)
    return parts


def load_base(gallery: Path) -> tuple[np.ndarray, np.ndarray]:
    """(every real photo and caption vector, scaled to unit length; the query captions'
    vectors). The shipped model's photo vectors have norm ≈1.27 and its captions 1: the
    noise scale below is a distance between unit vectors."""
    db = sqlite3.connect(f"file:{gallery / 'gallery.db'}?mode=ro", uri=True)
    dim = int(dict(db.execute("SELECT key, value FROM meta").fetchall())["dim"])
    photos = [r[0] for r in db.execute("SELECT vector FROM photos ORDER BY id")]
    captions = db.execute(
        "SELECT c.vector, p.path FROM captions c JOIN photos p ON p.id = c.photo_id ORDER BY c.id"
    ).fetchall()
    test = set((get_settings().flickr8k_dir / "Flickr_8k.testImages.txt").read_text().split())
    base = np.frombuffer(b"".join(photos + [c[0] for c in captions]), np.float32)
    base = base.reshape(-1, dim)
    norms = np.linalg.norm(base, axis=1, keepdims=True)
    base = base[norms[:, 0] > 1e-6] / norms[norms[:, 0] > 1e-6]
    test_rows = [
        i
        for i, (vec, path) in enumerate(captions)
        if Path(path).name in test and np.any(np.frombuffer(vec, np.float32))
    ]
    rng = np.random.default_rng(SEED)
    picked = rng.choice(test_rows, size=QUERIES, replace=False)
    queries = np.stack([np.frombuffer(captions[i][0], np.float32) for i in picked])
    return np.ascontiguousarray(base, np.float32), queries


def noise_scale(base: np.ndarray) -> float:
    """The median distance from a real vector to its nearest other real vector (unit
    vectors: √(2 − 2·similarity)); refuses a scale that collapsed (copies, not neighbours)."""
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(base)
    sims, _ = index.search(base[:5000], 2)
    tau = float(np.median(np.sqrt(np.maximum(0.0, 2 - 2 * sims[:, 1]))))
    if tau < 0.05:
        raise SystemExit(f"noise scale {tau:.4f}: the base vectors are not unit length")
    return tau


class SyntheticChunks:
    """(ids, vectors) chunks of the synthetic gallery (see the module), from row ``start``;
    ``after(last_id)``: the chunks after id ``last_id`` (a resumed build)."""

    def __init__(self, base: np.ndarray, n: int, tau: float, start: int = 0) -> None:
        self.base, self.n, self.tau, self.start = base, n, tau, start
        self.perm = np.random.default_rng(SEED).permutation(len(base))

    def after(self, last_id: int) -> SyntheticChunks:
        return SyntheticChunks(self.base, self.n, self.tau, last_id)  # ids are rows + 1

    def __iter__(self):
        dim = self.base.shape[1]
        for start in range(self.start, self.n, CHUNK):
            rows = np.arange(start, min(self.n, start + CHUNK))
            rng = np.random.default_rng([SEED, start])
            x = self.base[self.perm[rows % len(self.base)]] + rng.normal(
                scale=self.tau / np.sqrt(dim), size=(len(rows), dim)
            ).astype(np.float32)
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            yield (rows + 1).tolist(), x


class ExactTop:
    """The exact top 10 of each query over the chunks seen, saved at every multiple of
    ``every`` rows (so a resumed build resumes it too)."""

    def __init__(self, queries: np.ndarray, folder: Path, every: int) -> None:
        self.queries, self.folder, self.every = queries, folder, every
        self.best_s = np.full((len(queries), 10), -np.inf, np.float32)
        self.best_i = np.zeros((len(queries), 10), np.int64)
        folder.mkdir(parents=True, exist_ok=True)

    def resume(self, rows: int) -> None:
        if rows:
            state = np.load(self.folder / f"{rows}.npz")
            self.best_s, self.best_i = state["s"], state["i"]

    def see(self, ids: list[int], x: np.ndarray) -> None:
        s = self.queries @ x.T
        top = np.argpartition(-s, 10, axis=1)[:, :10]
        cand_s = np.concatenate([self.best_s, np.take_along_axis(s, top, 1)], axis=1)
        cand_i = np.concatenate([self.best_i, np.asarray(ids)[top]], axis=1)
        order = np.argsort(-cand_s, axis=1)[:, :10]
        self.best_s = np.take_along_axis(cand_s, order, 1)
        self.best_i = np.take_along_axis(cand_i, order, 1)
        if ids[-1] % self.every == 0:
            np.savez(self.folder / f"{ids[-1]}.npz", s=self.best_s, i=self.best_i)


class Watched:
    """The chunks of a build, with the exact answers and a progress line every 1M rows."""

    def __init__(self, chunks: SyntheticChunks, exact: ExactTop | None) -> None:
        self.chunks, self.exact = chunks, exact
        self.t0, self.first = time.perf_counter(), chunks.start

    def after(self, last_id: int) -> Watched:
        log.info("resuming after %d rows", last_id)
        if self.exact is not None:
            self.exact.resume(last_id)
        return Watched(self.chunks.after(last_id), self.exact)

    def __iter__(self):
        self.t0 = time.perf_counter()  # the rate of adding, not of training
        for ids, x in self.chunks:
            if self.exact is not None:
                self.exact.see(ids, x)
            yield ids, x
            if ids[-1] % 1_000_000 == 0:
                rate = (ids[-1] - self.first) / (time.perf_counter() - self.t0)
                log.info(
                    "%d rows, %.0f rows/s, eta %.1f h, peak RSS %.0f MB",
                    ids[-1],
                    rate,
                    (self.chunks.n - ids[-1]) / rate / 3600,
                    peak_rss_mb(),
                )


def settings_of(args: argparse.Namespace) -> IndexSettings:
    return IndexSettings(m=args.m, rerank=args.rerank, shard_size=args.shard_size)


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Build one (size, kind) index, save it, and the exact top 10 of every query."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    base, queries = load_base(args.base)
    dim = base.shape[1]
    tau = noise_scale(base)
    n, kind = args.size, args.kind
    params = settings_of(args)
    exact = ExactTop(queries, args.dir / "exact-state", params.shard_size) if args.exact else None
    chunks = Watched(SyntheticChunks(base, n, tau), exact)
    sample = np.empty((0, dim), np.float32)
    if kind in COMPRESSED:  # a seeded random sample, as the gallery draws from its records
        size = params.train_size(n)
        rows = np.sort(np.random.default_rng(SEED).choice(min(n, SAMPLE_FROM), size, False))
        parts = []
        for ids, x in SyntheticChunks(base, int(rows[-1]) + 1, tau):
            lo = ids[0] - 1
            parts.append(x[rows[(rows >= lo) & (rows < lo + len(ids))] - lo])
        sample = np.concatenate(parts)
    stem = args.dir / "images"
    t0 = time.perf_counter()
    index = VectorIndex.build(dim, kind, n, sample, chunks, stem, params, key="bench")
    index.save(stem, HEADER)
    seconds = time.perf_counter() - t0
    files = [p for p in args.dir.iterdir() if ".faiss" in p.name]
    if exact is not None:
        np.save(args.dir / "exact.npy", exact.best_i)
    np.save(args.dir / "queries.npy", queries)
    return {
        "build_s": round(seconds, 1),
        "disk_mb": round(sum(p.stat().st_size for p in files) / 2**20, 1),
        "build_peak_mb": round(peak_rss_mb()),
        "noise_tau": round(tau, 4),
        "base_vectors": len(base),
        "dim": dim,
        "index": index.describe(),
    }


def search(args: argparse.Namespace) -> dict[str, Any]:
    """Load the saved index as a server does; RSS, latency, recall@10."""
    faiss.omp_set_num_threads(1)
    queries = np.load(args.dir / "queries.npy")
    exact = np.load(args.exact_from / "exact.npy")
    # synthetic vector id j (rows + 1) is a copy of base vector perm[(j - 1) mod bases]
    perm = np.random.default_rng(SEED).permutation(len(load_base(args.base)[0]))

    def items(ids: np.ndarray) -> set[int]:
        return set(perm[(np.asarray(ids, np.int64) - 1) % len(perm)].tolist())

    ref_x = np.random.default_rng(0).normal(size=(100_000, queries.shape[1])).astype(np.float32)
    before = rss_mb()
    t0 = time.perf_counter()
    index = VectorIndex.load(args.dir / "images", HEADER)
    assert index is not None, "no snapshot"
    load_s = time.perf_counter() - t0
    loaded = rss_mb()

    def run() -> dict[str, float]:
        for q in queries:  # warm: a server that has answered a while has the pages
            index.search(q, 10)
        times, recalls, item_recalls = [], [], []
        for q, truth in zip(queries, exact, strict=True):
            t = time.perf_counter()
            hits = index.search(q, 10)[0]
            times.append(time.perf_counter() - t)
            recalls.append(len({i for i, _ in hits} & set(truth.tolist())) / 10)
            wanted = items(truth)
            item_recalls.append(len(items(np.array([i for i, _ in hits])) & wanted) / len(wanted))
        ms = np.array(times) * 1000
        return {
            **latency(ms, digits=3),
            "recall10": round(float(np.mean(recalls)), 4),
            "item_recall10": round(float(np.mean(item_recalls)), 4),
        }

    ref_ms = exact_search_ms(ref_x, queries)
    rows = []
    if index.kind in COMPRESSED:
        grid = args.grid or (OPQ_GRID if index.kind == "ivfopq" else GRID)
        for nprobe, k_factor in grid:
            index.settings.nprobe, index.settings.k_factor = nprobe, k_factor
            rows.append({"nprobe": nprobe, "k_factor": k_factor, **run()})
    elif index.kind == "hnsw":
        for ef in EF_GRID:
            index.settings.ef_search = ef
            rows.append({"ef_search": ef, **run()})
    else:
        rows.append(run())
    return {
        "load_s": round(load_s, 2),
        "rss_before_mb": round(before),
        "rss_loaded_mb": round(loaded),
        "rss_after_mb": round(rss_mb()),
        **rss_parts_mb(),  # after the queries
        "reference_exact_100k_ms": round(ref_ms, 3),
        "runs": rows,
    }


def child(mode: str, size: int, spec: str, folder: Path, args: argparse.Namespace) -> dict:
    """Run one build or search in a process of its own (its log on this one's stderr)."""
    kind, rerank, m = parse_kind(spec, args)
    cmd = [sys.executable, __file__, "--child", mode, "--size", str(size), "--kind", kind]
    cmd += ["--rerank", rerank, "--m", str(m), "--shard-size", str(args.shard_size)]
    cmd += ["--dir", str(folder), "--base", str(args.base), "--exact-from", str(args.exact_from)]
    cmd += ["--grid", ",".join(f"{n}x{f}" for n, f in args.grid)] if args.grid else []
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def parse_grid(text: str) -> list[tuple[int, int]]:
    """``16x1,64x1`` → [(16, 1), (64, 1)]; an argparse error for anything else."""
    try:
        grid = [tuple(int(v) for v in part.split("x")) for part in text.split(",")]
    except ValueError:
        grid = []
    if not grid or any(len(g) != 2 or min(g) < 1 for g in grid):
        raise argparse.ArgumentTypeError(f"not nprobe x k_factor pairs: {text!r} (e.g. 16x1,64x8)")
    return [(g[0], g[1]) for g in grid]


def parse_kind(spec: str, args: argparse.Namespace) -> tuple[str, str, int]:
    """``kind[:rerank][:m]`` (e.g. ``ivfpq:sq8``, ``ivfopq::128``) → (kind, rerank, m)."""
    kind, rerank, m = [*spec.split(":"), "", ""][:3]
    return kind, rerank or args.rerank, int(m or args.m)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", type=Path, default=Path("runs/scale/flickr8k-all"))
    p.add_argument("--sizes", default="100000,1000000")
    p.add_argument(
        "--kinds",
        default="flat,hnsw,ivfpq",
        help="kinds, each kind[:rerank][:m]: e.g. ivfpq, ivfpq:sq8, ivfopq::128",
    )
    p.add_argument("--work", type=Path, default=Path("runs/scale/work"))
    p.add_argument("--out", type=Path, default=Path("runs/bench/scale.json"))
    p.add_argument(
        "--grid",
        type=parse_grid,
        help="the compressed kinds' search settings, nprobe x k_factor each: e.g. 16x1,64x1 "
        "(default: every setting of the kind's grid; RSS after is after these alone)",
    )
    p.add_argument(
        "--search-only",
        action="store_true",
        help="measure the searches again on the indexes an earlier run left in --work",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep what an interrupted build left in --work and continue it",
    )
    p.add_argument("--rerank", default="fp16", help="ivfpq's re-rank store: fp16, sq8, sq4")
    p.add_argument("--m", type=int, default=64, help="PQ bytes a vector")
    p.add_argument("--shard-size", type=int, default=2_000_000)
    p.add_argument("--child", choices=["build", "search"])
    p.add_argument("--size", type=int)
    p.add_argument("--kind")
    p.add_argument("--dir", type=Path)
    p.add_argument("--exact-from", type=Path)
    args = p.parse_args()
    if args.child:
        args.exact = args.dir == args.exact_from
        result = build(args) if args.child == "build" else search(args)
        print(json.dumps(result))
        return
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    for size in [int(s) for s in args.sizes.split(",")]:
        first: Path | None = None
        for spec in args.kinds.split(","):
            folder = args.work / f"{size}-{spec.replace(':', '-')}"
            args.exact_from = first or folder  # the first kind's build computes the exact answers
            if args.search_only:
                built = dict(results[f"{size}/{spec}"])  # its build figures stay
            else:
                folder.mkdir(parents=True, exist_ok=True)
                if not args.resume:
                    shutil.rmtree(folder)
                    folder.mkdir()
                print(f"{size:,} {spec}: building …", file=sys.stderr, flush=True)
                built = child("build", size, spec, folder, args)
                print(f"  built {built}", file=sys.stderr, flush=True)
            searched = child("search", size, spec, folder, args)
            print(f"  searched {searched}", file=sys.stderr, flush=True)
            results[f"{size}/{spec}"] = {"size": size, "kind": spec, **built, **searched}
            first = first or folder
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=1))
    print(table(results))


def table(results: dict[str, Any]) -> str:
    head = ["vectors", "kind", "index", "build s", "disk MB", "RSS loaded / after MB (file-backed)"]
    head += ["search setting", "p50 ms", "p99 ms", "recall@10", "item recall@10"]
    head.append("ref. exact 100k ms")
    rows = []
    for r in results.values():
        for run in r["runs"]:
            grid = f"{run['nprobe']}×{run['k_factor']}" if "nprobe" in run else "–"
            grid = f"ef {run['ef_search']}" if "ef_search" in run else grid
            rows.append(
                [
                    f"{r['size']:,}",
                    r["kind"],
                    r["index"],
                    r["build_s"],
                    r["disk_mb"],
                    f"{r['rss_loaded_mb']} / {r['rss_after_mb']} ({r.get('rssfile_mb', '–')})",
                    grid,
                    run["p50_ms"],
                    run["p99_ms"],
                    run["recall10"],
                    run.get("item_recall10", "–"),
                    r["reference_exact_100k_ms"],
                ]
            )
    return "\n".join(markdown_table(head, rows))


if __name__ == "__main__":
    main()
