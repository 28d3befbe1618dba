"""Gallery storage and indexing figures (docs/BENCHMARKS.md, "Galleries that grow").

    python bench/gallery_storage.py writes --sizes 1000 100000 1000000   # write latency, startup
    python bench/gallery_storage.py indexing                             # all 8,091 Flickr8k photos

``writes``: for each size, a gallery of that many photos (vectors synthesised from real
ones, below) gets 100 uploads (two captions each) and 100 deletes through ``Gallery``
(each one SQLite transaction, fsynced); p50/p99 per write, then the time to open it
(snapshot + catch-up) and to open it with no snapshot (rebuilt from the records). The
same writes on the previous storage (``VectorStore`` at commit 984e308, read from git:
a whole-store save per write) run beside it. Reference in the same run: one exact
(flat) search over the gallery.

Synthetic vectors: the 8,091 real Flickr8k image vectors (the shipped SDT-RNN over
EfficientNet-Lite0 features) are mixed — each synthetic vector is a random convex
combination of three real ones plus 5% Gaussian noise, renormalised — so norms and the
spread of inner products look like a real gallery's.

``indexing``: ``groundsearch index``'s path (``index_photos``) over the Flickr8k photo
folder as a user folder without captions, into an empty gallery, with one CNN worker
per core; reference in the same run: one process, one torch thread, decode + the
checkpoint's CNN (EfficientNet-Lite2 for the shipped SDT-RNN) over the first 256 photos
(batch 16) — the target is ≥ 90% of that × cores.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexing_runs import IndexedFile, IndexedFiles

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, percentile

ROOT = Path(__file__).resolve().parent.parent
OLD_COMMIT = "984e308"


def real_vectors(cache: Path) -> np.ndarray:
    """The shipped model's vectors of every Flickr8k photo (computed once, cached)."""
    path = cache / "flickr8k-image-vectors.npy"
    if path.exists():
        return np.load(path)
    from groundsearch.common.settings import get_settings
    from groundsearch.index.ingest.indexer import index_photos
    from groundsearch.model.runtime.parsing import Parser

    s = get_settings()
    folder = cache / "flickr8k-gallery"
    parser = Parser(s.parser_dir, s.cache_dir)
    index_photos([s.flickr8k_dir / "Images"], folder, s.default_checkpoint, parser, progress=True)
    save_vectors(folder, path)
    shutil.rmtree(folder)
    return np.load(path)


def synthetic(real: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    picks = rng.integers(0, len(real), size=(n, 3))
    weights = rng.dirichlet(np.ones(3), size=n).astype(np.float32)
    x = np.einsum("nk,nkd->nd", weights, real[picks])
    x += (
        0.05
        * rng.normal(size=x.shape).astype(np.float32)
        * np.linalg.norm(x, axis=1, keepdims=True)
        / np.sqrt(x.shape[1])
    )
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def fill(folder: Path, size: int, real: np.ndarray, rng: np.random.Generator) -> None:
    g = Gallery.create(folder, real.shape[1], {"checkpoint_sha256": "bench"})
    chunk = 20_000
    for start in range(0, size, chunk):
        n = min(chunk, size - start)
        v = synthetic(real, n, rng)
        IndexedFiles(g).add_files(
            [
                IndexedFile(f"/photos/{start + i}.jpg", 1, 1, f"sha-{start + i}", v[i])
                for i in range(n)
            ]
        )
    g.close()


def time_writes(g: Gallery, real: np.ndarray, rng: np.random.Generator, n: int) -> dict[str, float]:
    add, remove = [], []
    ids = []
    for i in range(n):
        v = synthetic(real, 3, rng)
        start = time.perf_counter()
        image_id, _, _ = g.writes.add_photo(
            os.urandom(2048) + bytes([i % 256]),
            "jpg",
            v[0],
            ["a caption", "another caption"],
            v[1:],
        )
        add.append(1000 * (time.perf_counter() - start))
        ids.append(image_id)
    for image_id in ids:
        start = time.perf_counter()
        g.writes.remove_photo(image_id)
        remove.append(1000 * (time.perf_counter() - start))
    both = add + remove
    return {
        "upload_p50_ms": percentile(add, 50),
        "upload_p99_ms": percentile(add, 99),
        "delete_p50_ms": percentile(remove, 50),
        "delete_p99_ms": percentile(remove, 99),
        "write_p50_ms": percentile(both, 50),
        "write_p99_ms": percentile(both, 99),
    }


def old_store_module(tmp: Path) -> object:
    """``index/store.py`` as it was before the database (from git)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{OLD_COMMIT}:index/store.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = tmp / "old_store.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_store", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def old_writes(
    tmp: Path, size: int, real: np.ndarray, rng: np.random.Generator, n: int
) -> dict[str, float]:
    """The previous storage: an upload = add + save images + add + save captions."""
    mod = old_store_module(tmp)
    images = mod.VectorStore(real.shape[1])  # type: ignore[attr-defined]
    captions = mod.VectorStore(real.shape[1])  # type: ignore[attr-defined]
    for start in range(0, size, 20_000):
        k = min(20_000, size - start)
        images.add(
            synthetic(real, k, rng),
            [{"file": f"{start + i}.jpg", "captions": [], "source": "/photos"} for i in range(k)],
        )
    folder = tmp / "old"
    images.save(folder / "images")
    captions.save(folder / "captions")
    times = []
    for _ in range(n):
        v = synthetic(real, 3, rng)
        start = time.perf_counter()
        image_id = images.add(
            v[:1], [{"file": "x.jpg", "captions": ["a", "b"], "source": "upload"}]
        )[0]
        images.save(folder / "images")
        captions.add(v[1:], [{"text": "a", "image": "x.jpg", "image_id": image_id}] * 2)
        captions.save(folder / "captions")
        times.append(1000 * (time.perf_counter() - start))
    start = time.perf_counter()
    mod.VectorStore.load(folder / "images")  # type: ignore[attr-defined]
    opened = time.perf_counter() - start
    shutil.rmtree(folder)
    return {
        "upload_p50_ms": percentile(times, 50),
        "upload_p99_ms": percentile(times, 99),
        "open_s": opened,
    }


def bench_writes(
    sizes: list[int], n: int, old_n: int, cache: Path, work: Path
) -> dict[str, object]:
    rng = np.random.default_rng(0)
    real = real_vectors(cache)
    rows = []
    for size in sizes:
        folder = work / f"g{size}"
        start = time.perf_counter()
        fill(folder, size, real, rng)
        filled = time.perf_counter() - start
        start = time.perf_counter()
        g = Gallery.open(folder)
        opened = time.perf_counter() - start
        searches = []
        for q in synthetic(real, 21, rng):
            start = time.perf_counter()
            g.image_records(g.rank_images(q, 10).ids.tolist())
            searches.append(1000 * (time.perf_counter() - start))
        search_ms = percentile(searches[1:], 50)  # the first one warms the threads
        writes = time_writes(g, real, rng, n)
        g.close()
        shutil.rmtree(folder / "index")
        start = time.perf_counter()
        Gallery.open(folder).close(snapshot=False)
        rebuilt = time.perf_counter() - start
        db_mb = sum(p.stat().st_size for p in folder.glob("gallery.db*")) / 1e6
        shutil.rmtree(folder)
        old = old_writes(work, size, real, rng, old_n) if old_n else {}
        row = {
            "size": size,
            "fill_s": round(filled, 1),
            "open_s": round(opened, 2),
            "open_without_snapshot_s": round(rebuilt, 2),
            "exact_search_ms": round(search_ms, 1),
            "db_mb": round(db_mb),
            **{k: round(v, 2) for k, v in writes.items()},
            "previous_store": {k: round(v, 2) for k, v in old.items()},
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    return {"machine": machine("cpus", "python", "machine"), "writes_per_size": n, "rows": rows}


def cnn_reference(paths: list[Path], identity: str) -> float:
    """Photos per second: one process, one torch thread, decode + CNN (the checkpoint's
    backbone, as the workers run it), batch 16."""
    import torch

    from groundsearch.model.runtime.images.features import FeatureExtractor
    from groundsearch.model.runtime.images.photos import decode_photo

    torch.set_num_threads(1)
    fx = FeatureExtractor.for_identity(identity)
    fx.embed_images([decode_photo(paths[0])[0]])  # warm
    start = time.perf_counter()
    for i in range(0, len(paths), 16):
        fx.embed_images([decode_photo(p, min_side=fx.spec.resize)[0] for p in paths[i : i + 16]])
    return len(paths) / (time.perf_counter() - start)


def bench_indexing(work: Path, limit: int, cache: Path) -> dict[str, object]:
    from groundsearch.common.settings import get_settings
    from groundsearch.index.ingest.indexer import index_photos
    from groundsearch.model.runtime.checkpoints import load_checkpoint
    from groundsearch.model.runtime.parsing import Parser

    s = get_settings()
    images = s.flickr8k_dir / "Images"
    photos = sorted(images.iterdir())
    folder = images
    if limit:
        folder = work / "photos"
        folder.mkdir()
        for p in photos[:limit]:
            (folder / p.name).symlink_to(p)
    parser = Parser(s.parser_dir, s.cache_dir)
    backbone = load_checkpoint(s.default_checkpoint, parser=parser.version).backbone
    reference = cnn_reference(photos[:256], backbone)
    start = time.perf_counter()
    report = index_photos([folder], work / "gallery", s.default_checkpoint, parser, progress=True)
    seconds = time.perf_counter() - start
    rate = report.embedded / seconds
    if not limit:  # the writes benchmark mixes these real vectors
        save_vectors(work / "gallery", cache / "flickr8k-image-vectors.npy")
    cores = os.cpu_count() or 1
    return {
        "machine": machine("cpus", "python", "machine"),
        "photos": report.embedded,
        "seconds": round(seconds, 1),
        "photos_per_s": round(rate, 2),
        "backbone": backbone,
        "reference_one_process_photos_per_s": round(reference, 2),
        "share_of_reference_x_cores": round(rate / (reference * cores), 3),
        "summary": report.summary(),
    }


def save_vectors(folder: Path, path: Path) -> None:
    g = Gallery.open(folder)
    np.save(path, np.stack([g.image_vector(i) for i in g.image_ids()]))
    g.close()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("what", choices=["writes", "indexing"])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 100_000, 1_000_000])
    ap.add_argument(
        "--writes", type=int, default=100, help="uploads (and as many deletes) per size"
    )
    ap.add_argument(
        "--old-writes", type=int, default=5, help="writes on the previous store (0: skip)"
    )
    ap.add_argument("--limit", type=int, default=0, help="indexing: only the first N photos")
    ap.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "groundsearch-bench"
    )
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.cache) as tmp:
        if args.what == "writes":
            out = bench_writes(args.sizes, args.writes, args.old_writes, args.cache, Path(tmp))
        else:
            out = bench_indexing(Path(tmp), args.limit, args.cache)
    print(json.dumps(out, indent=1))
    sys.exit(0)


if __name__ == "__main__":
    main()
