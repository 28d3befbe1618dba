"""What sharding on Ray Serve costs a query: the front's fan-out and merge at S shards
against the one-piece index, single queries, on this machine.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/shard_fanout.py --sizes 100000:flat,400000:ivfpq

For each size and kind, the same seeded synthetic unit vectors (640-d, the shipped
model's dimension: each a random one of 2,000 random centres plus Gaussian noise of norm
about 0.795, the scale benchmark's median distance between real nearest neighbours; the
queries are drawn the same way) are built into one ``VectorIndex`` (``VectorIndex.build``,
``ivfpq`` written and memory-mapped back) and into ``S`` shards (``id mod S``, each its
own snapshot, and ``shards.json``, as ``write_shards`` lays them out). One process then
answers the same queries (batch 1, ``k`` = 10) four ways, interleaved query by query in
a rotating order so that the machine's load falls on all alike:

* ``one-piece``: ``VectorIndex.search`` in this process;
* ``local fan-out``: ``ShardedIndex`` over the shards in this process (one thread each);
* ``Ray Serve``: ``ShardedIndex`` over one Ray Serve deployment per shard (one replica
  each, ``groundsearch.service.core.sharding.start_shards``) on a local cluster;
* ``Ray round trip``: the same handles asked for ``info`` only (what a fan-out costs
  with no search in it);
* ``plain Ray actors, round trip``: one bare Ray actor per shard sent the query vector
  and answering at once (``ray.get`` of the calls: what Ray itself costs, without
  Serve's router and replica queue).

Besides wall time, the CPU time of the calling thread per query (``time.thread_time``:
for the Ray paths, what issuing and awaiting the fan-out costs the front's request
thread; Ray's own threads in the front are not in it).

Each row stands beside a reference measured in the same run: one exact search of one
query over 100,000 vectors (numpy, one thread). Every answer of the sharded paths is
checked against the one-piece answer (ids; ``flat``: scores too). Output:
``runs/bench/shard_fanout.json`` and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.index.search.index_kinds import IndexSettings
from groundsearch.index.search.shards import (
    LocalFanout,
    Shard,
    ShardedIndex,
    ShardSet,
    shard_of,
)
from groundsearch.index.search.vectors import VectorIndex

sys.path.insert(0, str(Path(__file__).parent))
from common import exact_search_ms, latency, unit_vectors

DIM = 640
CHUNK = 50_000
QUERIES = 300
K = 10
IDENTITY = {"bench": "shard-fanout"}


CENTRES = unit_vectors(np.random.default_rng(5), 2_000, DIM)
#: Each vector's distance from its centre, about (the scale benchmark's tau: the median
#: distance between real nearest neighbours of the shipped model).
TAU = 0.795


def clustered(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` unit vectors, each a random centre plus noise of norm about ``TAU``."""
    x = CENTRES[rng.integers(0, CENTRES.shape[0], n)]
    x = x + rng.normal(scale=TAU / np.sqrt(DIM), size=(n, DIM)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def chunks(n: int, seed: int, shard: int | None, shards: int):
    """The gallery's vectors in id order (ids from 1), only ``shard``'s when given."""
    rng = np.random.default_rng(seed)
    for start in range(0, n, CHUNK):
        x = clustered(rng, min(CHUNK, n - start))
        ids = np.arange(start + 1, start + 1 + x.shape[0], dtype=np.int64)
        if shard is not None:
            mine = shard_of(ids, shards) == shard
            ids, x = ids[mine], x[mine]
        yield ids.tolist(), x


def build(n: int, kind: str, shards: int, folder: Path, settings: IndexSettings) -> dict:
    """The one-piece index and the shards, written to ``folder``; build seconds."""
    sample = (
        clustered(np.random.default_rng(99), settings.train_size(n)) if kind == "ivfpq" else None
    )
    times = {}
    t = time.perf_counter()
    VectorIndex.build(
        DIM, kind, n, sample, chunks(n, 1, None, 1), folder / "whole" / "images", settings
    ).save(folder / "whole" / "images", {"identity": IDENTITY})
    times["one_piece_build_s"] = round(time.perf_counter() - t, 1)
    shard_set = ShardSet(folder / "shards", shards, DIM, kind, IDENTITY, n, 0, ())
    counts = []
    t = time.perf_counter()
    per = -(-n // shards)
    shard_sample = (
        clustered(np.random.default_rng(99), settings.train_size(per)) if kind == "ivfpq" else None
    )
    for s in range(shards):
        index = VectorIndex.build(
            DIM, kind, per, shard_sample, chunks(n, 1, s, shards), shard_set.stem(s), settings
        )
        index.save(shard_set.stem(s), shard_set.header(s))
        counts.append(len(index))
    times["shards_build_s"] = round(time.perf_counter() - t, 1)
    ShardSet(folder / "shards", shards, DIM, kind, IDENTITY, n, 0, tuple(counts)).write()
    return times


def exact_top(n: int, queries: np.ndarray) -> np.ndarray:
    """The exact top ``K`` ids of each query over the gallery (streamed)."""
    best_s = np.full((queries.shape[0], K), -np.inf, np.float32)
    best_i = np.zeros((queries.shape[0], K), np.int64)
    for ids, x in chunks(n, 1, None, 1):
        s = queries @ x.T
        all_s = np.concatenate([best_s, s], axis=1)
        all_i = np.concatenate([best_i, np.broadcast_to(np.asarray(ids), s.shape)], axis=1)
        top = np.argsort(-all_s, axis=1)[:, :K]
        best_s = np.take_along_axis(all_s, top, 1)
        best_i = np.take_along_axis(all_i, top, 1)
    return best_i


def measure(n: int, kind: str, shards: int, folder: Path, settings: IndexSettings) -> dict:
    import ray
    from ray import serve

    from groundsearch.service.core.sharding import start_shards, stop_shards

    @ray.remote
    class Pinger:
        def ping(self, q: np.ndarray) -> int:
            return int(q.shape[0])

    whole = VectorIndex.load(folder / "whole" / "images", {"identity": IDENTITY})
    assert whole is not None
    whole.settings = settings
    shard_set = ShardSet.read(folder / "shards")
    local = LocalFanout([Shard.open(shard_set, s, settings) for s in range(shards)])
    local_index = ShardedIndex(local, shard_set, settings)
    ray_fanout = start_shards(shard_set, settings, cpus=0.5)
    actors = [Pinger.options(num_cpus=0.1).remote() for _ in range(shards)]  # type: ignore[attr-defined]
    ray_index = ShardedIndex(ray_fanout, shard_set, settings)
    queries = clustered(np.random.default_rng(7), QUERIES)
    ref_x = unit_vectors(np.random.default_rng(0), 100_000, DIM)
    exact = exact_top(n, queries)

    paths = {
        "one-piece": lambda q: whole.search(q, K),
        "local fan-out": lambda q: local_index.search(q, K),
        "Ray Serve": lambda q: ray_index.search(q, K),
        "Ray round trip": lambda q: ray_fanout.call("info", [()] * shards),
        "plain Ray actors, round trip": lambda q: ray.get([a.ping.remote(q) for a in actors]),
    }
    names = list(paths)
    for q in queries:  # warm: the pages the queries touch, Ray's connections
        for name in names:
            paths[name](q)
    times: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    mismatches = {name: 0 for name in names[1:3]}  # the searching paths
    found = {name: 0 for name in names[:3]}
    for j, q in enumerate(queries):
        answers = {}
        for name in names[j % len(names) :] + names[: j % len(names)]:
            t, c = time.perf_counter(), time.thread_time()
            answers[name] = paths[name](q)
            times[name].append((time.perf_counter() - t) * 1000)
            cpu[name].append((time.thread_time() - c) * 1000)
        want = answers["one-piece"][0]
        for name in found:
            found[name] += len({i for i, _ in answers[name][0]} & set(exact[j].tolist()))
        for name in mismatches:
            got = answers[name][0]
            same = [i for i, _ in got] == [i for i, _ in want]
            if kind == "flat":
                same = same and got == want
            mismatches[name] += not same
    ref_ms = exact_search_ms(ref_x, queries, K)
    infos = ray_fanout.call("info", [()] * shards)
    stop_shards(shards)
    for a in actors:
        ray.kill(a)
    serve.shutdown()
    local.close()
    return {
        "n": n,
        "kind": kind,
        "shards": shards,
        "index": whole.describe(),
        "shard_index": infos[0]["describe"],
        "replica_rss_mb": [i["rss_mb"] for i in infos],
        "reference_exact_100k_ms": round(ref_ms, 3),
        "paths": {
            name: {
                **latency(v, digits=3),
                "mean_ms": round(float(np.mean(v)), 3),
                "caller_thread_cpu_ms": round(float(np.mean(cpu[name])), 3),
            }
            for name, v in times.items()
        },
        "answers_differing_from_one_piece": mismatches,
        "recall10": {name: round(hits / (K * QUERIES), 4) for name, hits in found.items()},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="100000:flat,400000:ivfpq", help="N:KIND,…")
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--work", type=Path, default=Path("runs/bench/shard-fanout"))
    p.add_argument("--out", type=Path, default=Path("runs/bench/shard_fanout.json"))
    p.add_argument("--keep", action="store_true", help="keep the indexes on disk")
    args = p.parse_args()
    import ray

    faiss.omp_set_num_threads(1)
    settings = IndexSettings()  # the server's defaults: nprobe 16, k_factor 32
    ray.init(
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        logging_level=logging.WARNING,
        log_to_driver=False,
    )
    rows: list[dict[str, Any]] = []
    try:
        for item in args.sizes.split(","):
            size, kind = item.split(":")
            n = int(size)
            folder = args.work / f"{n}-{kind}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            built = build(n, kind, args.shards, folder, settings)
            row = {**measure(n, kind, args.shards, folder, settings), **built}
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        ray.shutdown()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print("| vectors | kind | path | p50 ms | p99 ms | recall@10 | ref. exact 100k ms |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for r in rows:
        for name, v in r["paths"].items():
            recall = r["recall10"].get(name, "–")
            print(
                f"| {r['n']:,} | {r['kind']} | {name} | {v['p50_ms']} | {v['p99_ms']} "
                f"| {recall} | {r['reference_exact_100k_ms']} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
