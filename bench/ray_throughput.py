"""Ray Data embedding against the local path (docs/BENCHMARKS.md, "Ray Data embedding").

    OMP_WAIT_POLICY=PASSIVE python bench/ray_throughput.py   # = make bench-ray; --photos N

The same N Flickr8k photos (links in a temp folder, no captions), each time into a fresh
gallery, by ``index_photos`` (``groundsearch index``'s path): the local path with a
worker process per core, and the Ray path (``ray=...``) with 1 and one-per-core actors
on a local cluster started once beforehand (as a running cluster would be; its start is
timed apart; its workers at niceness 0 like the local path's, where Ray's default is 15),
in the order ABC CBA … for ``--repeats`` rounds, the fastest run of each kept (the
machine is shared). Before each run, a reference: one photo's decode + CNN pass in this
process with one torch thread, the median of 5, so each figure stands beside the
machine's speed at that moment.

Per run: photos embedded / wall time of the whole call (model load, worker or actor
start included); "steady": the last three quarters of the photos over the time from the
first quarter's last result to the last one; CPU seconds per photo: this process and
every descendant (worker processes, or the Ray cluster's GCS, raylet and actors), read
from /proc, over the whole call and over the steady part — what a machine shared with
other jobs cannot blur, and the measure of Ray's overhead: on a machine of its own,
CPU-bound, throughput ∝ 1 / CPU per photo.

The writer: one process writes the gallery whatever the cluster's size, so its rate is
the ceiling: ``IndexedFiles.add_files`` of batches of 64 photos (random unit vectors) into an
empty gallery, and the driver's whole share of a photo (SHA-256 of the file, projection
of its features, ``add_files``; Flickr8k's files are ~120 KB, larger photos hash
slower). The projection for 1M and 100M photos on M machines of C cores assumes linear
scaling of the per-core rate (1 / the Ray path's steady CPU seconds per photo, driver
and Ray's own processes included) up to that ceiling, measured at gallery sizes of thousands (the
storage benchmark shows flat write latency up to 1M). Output:
runs/bench/ray-throughput.json and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, markdown_table, unit_vectors

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "runs" / "bench" / "ray-throughput.json"
MACHINES = [(1, 2), (10, 2), (100, 2), (1, 16), (10, 16), (100, 16)]
TOTALS = [1_000_000, 100_000_000]


def reference(photos: list[Path], identity: str, runs: int = 5) -> float:
    """Seconds of one photo's decode + CNN pass (one torch thread), median of ``runs``."""
    import torch

    from groundsearch.model.runtime.images.features import FeatureExtractor
    from groundsearch.model.runtime.images.photos import decode_photo

    torch.set_num_threads(1)
    fx = FeatureExtractor.for_identity(identity)
    fx.embed_images([decode_photo(photos[0], min_side=fx.spec.resize)[0]])  # warm
    times = []
    for p in photos[1 : runs + 1]:
        start = time.perf_counter()
        fx.embed_images([decode_photo(p, min_side=fx.spec.resize)[0]])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds (user + system) of ``root`` and of each of its descendants (Linux)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # from field 3 (state) on
        parent[int(d.name)] = int(fields[1])
        cpu[int(d.name)] = (int(fields[11]) + int(fields[12])) / tick
    tree, grew = {root}, True
    while grew:
        found = {pid for pid, pp in parent.items() if pp in tree} - tree
        tree |= found
        grew = bool(found)
    return {pid: cpu[pid] for pid in tree if pid in cpu}


class CpuMeter:
    """CPU seconds this process and its descendants spend while it runs (sampled every
    ``every`` s; a process that ends between samples loses its last interval's share)."""

    def __init__(self, every: float = 0.25) -> None:
        self.every = every
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.samples: list[tuple[float, float]] = []  # (time, CPU seconds so far)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> CpuMeter:
        self.base = tree_cpu(os.getpid())
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.last.update(tree_cpu(os.getpid()))

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            self.last.update(tree_cpu(os.getpid()))
            self.samples.append((time.perf_counter(), self.seconds))

    def between(self, start: float, end: float) -> float:
        """CPU seconds spent from ``start`` to ``end`` (the samples nearest them)."""
        times = np.array([t for t, _ in self.samples])
        cpu = np.array([c for _, c in self.samples])
        return float(np.interp(end, times, cpu) - np.interp(start, times, cpu))

    @property
    def seconds(self) -> float:
        return sum(max(0.0, v - self.base.get(pid, 0.0)) for pid, v in self.last.items())


def index_once(folder: Path, work: Path, parser: Any, **kwargs: Any) -> dict[str, float]:
    """One indexing run (an ``Indexer`` session's pass, as ``index_photos`` runs it) into a
    fresh gallery: whole-call and steady rates, CPU seconds per photo (this process and its
    descendants: workers, or the Ray cluster). A photo's time is when the pass asks its
    ``stop`` (after each photo's result)."""
    from groundsearch.common.settings import get_settings
    from groundsearch.index.ingest.indexer import Indexer

    stamps: list[float] = []

    def stamp() -> bool:
        stamps.append(time.perf_counter())
        return False  # never stop

    gallery = Path(tempfile.mkdtemp(dir=work)) / "gallery"
    checkpoint = get_settings().default_checkpoint
    with CpuMeter() as meter:
        start = time.perf_counter()
        with Indexer([folder], gallery, checkpoint, parser, **kwargs) as session:
            report = session.index(stop=stamp)
        seconds = time.perf_counter() - start
    skip = len(stamps) // 4  # the start: workers loading, the first batches in flight
    span = stamps[-1] - stamps[skip] if len(stamps) > 1 else 0.0
    steady = (len(stamps) - 1 - skip) / span if span > 0 else 0.0
    steady_cpu = meter.between(stamps[skip], stamps[-1]) / max(len(stamps) - 1 - skip, 1)
    return {
        "photos": report.embedded,
        "seconds": round(seconds, 1),
        "photos_per_s": round(report.embedded / seconds, 2),
        "steady_photos_per_s": round(steady, 2),
        "first_photo_after_s": round(stamps[0] - start, 1) if stamps else 0.0,
        "cpu_s_per_photo": round(meter.seconds / max(report.embedded, 1), 4),
        "steady_cpu_s_per_photo": round(steady_cpu, 4),
        "processes": len(meter.last),
    }


def writer(
    work: Path, photos: list[Path], model: Any, dim: int, feature_dim: int, n: int = 2048
) -> dict[str, float]:
    """The gallery writer's rates: ``add_files`` alone, and with hashing and projection."""
    from groundsearch.common.files import sha256_file
    from groundsearch.index.gallery import Gallery
    from groundsearch.index.ingest.indexing_runs import IndexedFile, IndexedFiles

    rng = np.random.default_rng(0)
    vectors = unit_vectors(rng, n, dim)
    gallery = Gallery.open_or_create(work / "writer", dim, {"checkpoint": "bench"}, "flat")
    files = IndexedFiles(gallery)
    try:
        start = time.perf_counter()
        for i in range(0, n, 64):
            files.add_files(
                [
                    IndexedFile(f"/bench/{j}.jpg", 1000, j, f"{j:064x}", vectors[j])
                    for j in range(i, min(n, i + 64))
                ],
                run=1,
            )
        commit = n / (time.perf_counter() - start)
    finally:
        gallery.close()
    features = rng.standard_normal((64, feature_dim)).astype(np.float32)
    sample = photos[:64]
    start = time.perf_counter()
    for p in sample:
        sha256_file(p)
    model.embed_images(features[: len(sample)])
    other = (time.perf_counter() - start) / len(sample)  # seconds per photo
    return {
        "add_files_photos_per_s": round(commit, 1),
        "hash_and_project_ms_per_photo": round(other * 1000, 2),
        "driver_photos_per_s": round(1 / (1 / commit + other), 1),
    }


def projection(per_core: float, ceiling: float) -> list[dict[str, object]]:
    rows = []
    for machines, cores in MACHINES:
        rate = min(machines * cores * per_core, ceiling)
        row: dict[str, object] = {
            "machines": machines,
            "cores_each": cores,
            "photos_per_s": round(rate, 1),
            "writer_bound": machines * cores * per_core > ceiling,
        }
        for total in TOTALS:
            row[f"hours_{total}"] = round(total / rate / 3600, 3)
        rows.append(row)
    return rows


def duration(hours: float) -> str:
    if hours < 1:
        return f"{hours * 60:.0f} min"
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.1f} days"


def table(out: dict[str, Any]) -> str:
    head = ["run", "photos/s (whole call)", "steady photos/s", "first photo after"]
    head += ["CPU s / photo (whole call / steady)", "reference: one photo's CNN pass"]
    rows = [
        [
            name,
            r["photos_per_s"],
            r["steady_photos_per_s"],
            f"{r['first_photo_after_s']} s",
            f"{r['cpu_s_per_photo']} / {r['steady_cpu_s_per_photo']}",
            f"{r['reference_ms']} ms",
        ]
        for name, r in out["runs"].items()
    ]
    lines = markdown_table(head, rows, align="lrrrrr")
    lines += [
        "",
        f"Ray (an actor per core) / local: **{out['ray_share_of_local_steady_cpu']:.0%}** by "
        f"steady CPU per photo, {out['ray_share_of_local_cpu']:.0%} by whole-call CPU per "
        f"photo, {out['ray_share_of_local']:.0%} by whole-call photos/s, "
        f"{out['ray_share_of_local_steady']:.0%} steady (target ≥ 85%); local cluster start "
        f"{out['cluster_start_s']} s.",
        "",
    ]
    w = out["writer"]
    lines += [
        f"Writer: `add_files` {w['add_files_photos_per_s']} photos/s; with hashing and "
        f"projection ({w['hash_and_project_ms_per_photo']} ms/photo) "
        f"{w['driver_photos_per_s']} photos/s (the ceiling); per core "
        f"{out['per_core_photos_per_s']} photos/s.",
        "",
    ]
    rows = [
        [
            f"{r['machines']} × {r['cores_each']}",
            f"{r['photos_per_s']}" + (" (writer-bound)" if r["writer_bound"] else ""),
            duration(r["hours_1000000"]),
            duration(r["hours_100000000"]),
        ]
        for r in out["projection"]
    ]
    head = ["machines × cores", "photos/s", "1M photos", "100M photos"]
    lines += markdown_table(head, rows, align="lrrr")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--photos", type=int, default=400, help="Flickr8k photos per run")
    ap.add_argument("--repeats", type=int, default=2, help="rounds (ABC CBA order; best kept)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    import ray

    from groundsearch.common.settings import get_settings
    from groundsearch.model.runtime.checkpoints import load_checkpoint
    from groundsearch.model.runtime.images.backbones import get_spec
    from groundsearch.model.runtime.parsing import Parser

    s = get_settings()
    photos = sorted((s.flickr8k_dir / "Images").iterdir())[: args.photos]
    parser = Parser(s.parser_dir, s.cache_dir)
    model = load_checkpoint(s.default_checkpoint, parser=parser.version)
    identity = model.backbone
    feature_dim = get_spec(identity.partition("-10crop")[0]).dim
    dim = int(model.embed_images(np.zeros((1, feature_dim), np.float32)).shape[1])
    cores = os.cpu_count() or 1
    configs: dict[str, dict[str, Any]] = {
        f"local path, {cores} worker processes": {"workers": cores},
        "Ray Data, 1 actor": {"workers": 1, "ray": "auto"},
        f"Ray Data, {cores} actors": {"workers": cores, "ray": "auto"},
    }
    order = [
        name for r in range(args.repeats) for name in list(configs)[:: 1 if r % 2 == 0 else -1]
    ]
    every: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    # The cluster runs its workers at niceness 0, as the local path's workers run (Ray's
    # default, 15, hands the CPU to anything else on a shared machine).
    os.environ.setdefault("RAY_worker_niceness", "0")
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")  # quiet C++ core logs
    start = time.perf_counter()
    ray.init(
        address="local",
        num_cpus=cores,
        include_dashboard=False,
        logging_level=logging.ERROR,
        log_to_driver=False,
    )
    cluster_start = time.perf_counter() - start
    try:
        with tempfile.TemporaryDirectory(prefix="ray-bench-") as tmp:
            work = Path(tmp)
            folder = work / "photos"
            folder.mkdir()
            for p in photos:
                (folder / p.name).symlink_to(p)
            for name in order:
                ref = reference(photos, identity)
                r = index_once(folder, work, parser, **configs[name])
                r["reference_ms"] = round(ref * 1000, 1)
                every[name].append(r)
                print(name, r, flush=True)
            written = writer(work, photos, model, dim, feature_dim)
    finally:
        ray.shutdown()
    runs = {name: max(rs, key=lambda r: r["photos_per_s"]) for name, rs in every.items()}
    local, ray_full = runs[next(iter(runs))], list(runs.values())[-1]
    per_core = 1 / ray_full["steady_cpu_s_per_photo"]
    out = {
        "machine": machine("cores", "cpu", "python", "machine"),
        "date": time.strftime("%Y-%m-%d"),
        "photos": len(photos),
        "backbone": identity,
        "ray": ray.__version__,
        "cluster_start_s": round(cluster_start, 1),
        "runs": runs,
        "every_run": every,
        "ray_share_of_local": round(ray_full["photos_per_s"] / local["photos_per_s"], 3),
        "ray_share_of_local_steady": round(
            ray_full["steady_photos_per_s"] / local["steady_photos_per_s"], 3
        ),
        "ray_share_of_local_cpu": round(local["cpu_s_per_photo"] / ray_full["cpu_s_per_photo"], 3),
        "ray_share_of_local_steady_cpu": round(
            local["steady_cpu_s_per_photo"] / ray_full["steady_cpu_s_per_photo"], 3
        ),
        "writer": written,
        "per_core_photos_per_s": round(per_core, 2),
        "projection": projection(per_core, written["driver_photos_per_s"]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(table(out))
    print(f"\n(written to {args.out})")


if __name__ == "__main__":
    main()
