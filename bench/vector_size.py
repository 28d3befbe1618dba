"""Vector size against retrieval quality (docs/BENCHMARKS.md, "Vector size").

    python bench/vector_size.py --gallery runs/scale/flickr8k-all
        [--out runs/bench/vector-size.json]

The shipped SDT-RNN's 640-d vector is ten snapshot models' 64-d unit vectors, each
scaled by 1/√10 and concatenated, so that an inner product is their mean cosine. This
measures what storing and searching it in less memory costs on the Flickr8k 1K test
split (1,000 photos, 5,000 captions: R@1/5/10 both ways, median rank, rsum), with the
vectors read from a gallery that holds all of Flickr8k (``groundsearch index --flickr8k
--split ''``):

- exact 640-d float32 (the reference; docs/RESULTS.md has test rsum 251.6);
- scalar quantisation (FAISS ``SQfp16``, ``SQ8``);
- product quantisation ``PQ{m}`` (m sub-quantisers × 8 bits), and ``OPQ{m},PQ{m}``;
- the 64-d mean of the ten snapshot segments, renormalised (queries too: a 64-d model),
  and, for comparison, the last snapshot's 64-d segment alone;
- the 64-d mean, or PQ (FAISS ``IndexRefine``), for candidates, the top R of which are
  re-ranked by the exact 640-d inner product.

The database side is compressed (photos for image search, captions for describing
photos) and the query stays exact, as a service searches (asymmetric distance). A
compressed variant's scores are the query's inner products with the decoded vectors
(``sa_encode``/``sa_decode``: the same as FAISS's asymmetric search); a re-ranked
variant's order is its top R by exact score, then everything else in compressed order.
Ranks and R@K come from ``groundsearch.model.training.evaluation.retrieval``. Codecs are
trained on the train split's vectors of the database kind (6,000 photos or 30,000
captions), never on test.

Memory counts the codes plus an 8-byte id per vector (FAISS ``IndexIDMap`` and IVF lists
store int64 ids); codebooks and the OPQ rotation are fixed (< 2 MB) and not counted. A
re-ranked variant also needs the full float32 vectors (2,560 B each): in RAM for FAISS
``IndexRefineFlat``, or read from the gallery's SQLite records for the R candidates.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from groundsearch.common.settings import Settings
from groundsearch.model.data.flickr import FLICKR8K_SPLITS
from groundsearch.model.training.evaluation.retrieval import (
    RECALL_AT,
    i2t_ranks,
    retrieval_metrics,
    summarize,
    t2i_ranks,
)

sys.path.insert(0, str(Path(__file__).parent))
from common import machine, markdown_table

DIM = 640
MEMBERS = 10
SEGMENT = DIM // MEMBERS
ID_BYTES = 8
FULL_BYTES = DIM * 4
PQ_M = (16, 32, 64, 80, 160)
OPQ_M = (32, 64)
MEAN_RERANK = (20, 50, 100)
PQ_RERANK = {32: (50, 100), 64: (50, 100)}
#: OPQ learns its rotation on a sample (all 30,000 captions take ~10 min on 2 cores).
OPQ_TRAIN = 10_000


@dataclass(frozen=True)
class Base:
    """Every photo and caption of the gallery, in photo-id and caption-id order."""

    photos: np.ndarray  # photos × 640 float32
    captions: np.ndarray  # captions × 640 float32
    caption_photo: np.ndarray  # photo row of each caption
    split: np.ndarray  # 'train' / 'dev' / 'test', or '' for photos in no split list


@dataclass(frozen=True)
class Side:
    """One search direction: exact queries, and the database's train and test vectors."""

    queries: np.ndarray
    train: np.ndarray
    database: np.ndarray


def unpack(rows: list[tuple[Any, ...]], column: int) -> np.ndarray:
    return np.stack([np.frombuffer(r[column], dtype=np.float32) for r in rows])


def load_base(gallery: Path, flickr8k: Path) -> Base:
    """The gallery's vectors and each photo's Flickr8k split (read-only: an indexer may
    still be writing)."""
    db = sqlite3.connect(f"file:{gallery / 'gallery.db'}?mode=ro", uri=True)
    try:
        photos = db.execute("SELECT id, path, vector FROM photos ORDER BY id").fetchall()
        captions = db.execute("SELECT photo_id, vector FROM captions ORDER BY id").fetchall()
        files = db.execute("SELECT photo_id, path FROM files").fetchall()
    finally:
        db.close()
    of_name: dict[str, str] = {}
    for split, name in FLICKR8K_SPLITS.items():
        for line in (flickr8k / name).read_text().split():
            of_name[line] = split
    row = {pid: i for i, (pid, _, _) in enumerate(photos)}
    # a photo stored once for identical files is in the split of any of its files
    split = [of_name.get(Path(path).name, "") for _, path, _ in photos]
    for pid, path in files:
        if pid in row and not split[row[pid]]:
            split[row[pid]] = of_name.get(Path(path).name, "")
    return Base(
        photos=unpack(photos, 2),
        captions=unpack(captions, 1),
        caption_photo=np.array([row[c[0]] for c in captions], dtype=np.int64),
        split=np.array(split),
    )


def mean64(x: np.ndarray) -> np.ndarray:
    """The ten snapshot segments averaged and renormalised."""
    m = x.reshape(len(x), MEMBERS, SEGMENT).mean(axis=1)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def last64(x: np.ndarray) -> np.ndarray:
    """The last snapshot's segment, renormalised."""
    m = x[:, -SEGMENT:]
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """FAISS's C++ warnings (fewer than 39 points per centroid on 6,000 photos) muted."""
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def codec(spec: str, train: np.ndarray) -> faiss.Index:
    """A FAISS codec trained on ``train`` (OPQ's rotation on at most OPQ_TRAIN of them)."""
    index = faiss.index_factory(DIM, spec, faiss.METRIC_INNER_PRODUCT)
    if isinstance(index, faiss.IndexPreTransform):
        faiss.downcast_VectorTransform(index.chain.at(0)).max_train_points = OPQ_TRAIN
    with quiet_stderr():
        index.train(np.ascontiguousarray(train))
    return index


def decoded(index: faiss.Index, x: np.ndarray) -> np.ndarray:
    return index.sa_decode(index.sa_encode(np.ascontiguousarray(x)))


def reranked(approx: np.ndarray, exact: np.ndarray, r: int) -> np.ndarray:
    """Query-major scores ordering each query's top ``r`` by ``approx`` first, by exact
    score, and the rest after them in ``approx`` order."""
    top = np.argpartition(-approx, r - 1, axis=1)[:, :r]
    out = approx.astype(np.float64)
    rows = np.arange(len(out))[:, None]
    out[rows, top] = exact[rows, top] + (2.0 + np.abs(approx).max() + np.abs(exact).max())
    return out


#: A variant: (side, codec cache) → query-major scores of that side's queries.
Scorer = Callable[[Side, dict[str, faiss.Index]], np.ndarray]


@dataclass(frozen=True)
class Variant:
    name: str
    index_bytes: int  # per vector, codes + id
    rerank: bool  # also keeps the full vectors for re-ranking
    scores: Scorer


def trained(spec: str, side: Side, cache: dict[str, faiss.Index]) -> faiss.Index:
    if spec not in cache:
        cache[spec] = codec(spec, side.train)
    return cache[spec]


def quantised(spec: str) -> Scorer:
    return lambda s, c: s.queries @ decoded(trained(spec, s, c), s.database).T


def quantised_rerank(spec: str, r: int) -> Scorer:
    def scores(s: Side, c: dict[str, faiss.Index]) -> np.ndarray:
        approx = s.queries @ decoded(trained(spec, s, c), s.database).T
        return reranked(approx, s.queries @ s.database.T, r)

    return scores


def mean_rerank(r: int) -> Scorer:
    def scores(s: Side, _: dict[str, faiss.Index]) -> np.ndarray:
        approx = mean64(s.queries) @ mean64(s.database).T
        return reranked(approx, s.queries @ s.database.T, r)

    return scores


def exact(s: Side, _: dict[str, faiss.Index]) -> np.ndarray:
    return s.queries @ s.database.T


def projected(f: Callable[[np.ndarray], np.ndarray]) -> Scorer:
    """Queries and database both mapped to 64-d by ``f``."""
    return lambda s, _: f(s.queries) @ f(s.database).T


def variants() -> list[Variant]:
    small = SEGMENT * 4 + ID_BYTES
    out = [
        Variant("640-d float32 (exact)", FULL_BYTES + ID_BYTES, False, exact),
        Variant("640-d float16 (SQfp16)", DIM * 2 + ID_BYTES, False, quantised("SQfp16")),
        Variant("640-d 8-bit (SQ8)", DIM + ID_BYTES, False, quantised("SQ8")),
    ]
    # "np": no polysemous training (a code permutation for Hamming filtering, which
    # reconstruction does not use and which takes minutes)
    out += [Variant(f"PQ{m}", m + ID_BYTES, False, quantised(f"PQ{m}np")) for m in PQ_M]
    out += [
        Variant(f"OPQ{m},PQ{m}", m + ID_BYTES, False, quantised(f"OPQ{m},PQ{m}np")) for m in OPQ_M
    ]
    out += [
        Variant("64-d mean", small, False, projected(mean64)),
        Variant("64-d last snapshot", small, False, projected(last64)),
    ]
    out += [Variant(f"64-d mean + re-rank {r}", small, True, mean_rerank(r)) for r in MEAN_RERANK]
    out += [
        Variant(f"PQ{m} + re-rank {r}", m + ID_BYTES, True, quantised_rerank(f"PQ{m}np", r))
        for m, rs in PQ_RERANK.items()
        for r in rs
    ]
    return out


def measure(base: Base) -> dict[str, Any]:
    """Every variant's retrieval metrics and memory on the test split."""
    test = np.flatnonzero(base.split == "test")
    at = {photo: i for i, photo in enumerate(test)}
    caps = np.flatnonzero(np.isin(base.caption_photo, test))
    caption_image = np.array([at[p] for p in base.caption_photo[caps]], dtype=np.int64)
    images, captions = base.photos[test], base.captions[caps]
    train_photos = base.split == "train"
    train_captions = train_photos[base.caption_photo]
    # image search: captions query the photos; describing: photos query the captions
    t2i_side = Side(captions, base.photos[train_photos], images)
    i2t_side = Side(images, base.captions[train_captions], captions)
    reference = retrieval_metrics(images @ captions.T, caption_image)
    caches: tuple[dict[str, faiss.Index], dict[str, faiss.Index]] = ({}, {})
    rows = []
    for v in variants():
        start = time.perf_counter()
        t2i = summarize(t2i_ranks(v.scores(t2i_side, caches[0]).T, caption_image))
        i2t = summarize(i2t_ranks(v.scores(i2t_side, caches[1]), caption_image))
        rows.append(
            {
                "variant": v.name,
                "i2t": i2t,
                "t2i": t2i,
                "rsum": sum(i2t[f"R@{k}"] + t2i[f"R@{k}"] for k in RECALL_AT),
                "index_bytes_per_vector": v.index_bytes,
                "rerank_bytes_per_vector": FULL_BYTES if v.rerank else 0,
                "seconds": time.perf_counter() - start,
            }
        )
    if abs(rows[0]["rsum"] - reference["rsum"]) > 1e-9:
        raise AssertionError("the exact variant disagrees with retrieval_metrics")
    return {
        "test": {"photos": len(test), "captions": len(caps)},
        "train": {"photos": int(train_photos.sum()), "captions": int(train_captions.sum())},
        "reference": reference,
        "variants": rows,
    }


def gb(bytes_per_vector: int, n: int) -> str:
    total = bytes_per_vector * n
    return f"{total / 1e9:.2f} GB" if total >= 1e9 else f"{total / 1e6:.0f} MB"


def table(rows: list[dict[str, Any]]) -> str:
    """The results as a markdown table."""
    head = ["variant", "i2t R@1", "R@5", "R@10", "med r", "t2i R@1", "R@5", "R@10", "med r"]
    head += ["rsum", "Δ rsum", "B/vector (index + re-rank store)", "1M", "10M"]
    ref = rows[0]["rsum"]
    lines = []
    for r in rows:
        idx, full = r["index_bytes_per_vector"], r["rerank_bytes_per_vector"]
        b = f"{idx:,}" + (f" + {full:,}" if full else "")
        mem = [gb(idx, n) + (f" + {gb(full, n)}" if full else "") for n in (10**6, 10**7)]
        cells = [
            f"{r[d][f'R@{k}']:.1f}" if k else f"{r[d]['median_rank']:g}"
            for d in ("i2t", "t2i")
            for k in (*RECALL_AT, 0)
        ]
        lines.append([r["variant"], *cells, f"{r['rsum']:.1f}", f"{r['rsum'] - ref:+.1f}", b, *mem])
    return "\n".join(markdown_table(head, lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gallery", type=Path, required=True, help="gallery folder (gallery.db)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench/vector-size.json"))
    ap.add_argument("--flickr8k", type=Path, default=Settings().flickr8k_dir, help="split lists")
    args = ap.parse_args()
    start = time.perf_counter()
    base = load_base(args.gallery, args.flickr8k)
    result = measure(base)
    result["gallery"] = {"photos": len(base.photos), "captions": len(base.captions)}
    result["machine"] = machine("cpus", "cpu", faiss=faiss.__version__)
    result["wall_seconds"] = time.perf_counter() - start
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result["variants"]))
    print(f"\ntest {result['test']}; codecs trained on train {result['train']}")
    print(f"{result['wall_seconds']:.0f} s; written to {args.out}")


if __name__ == "__main__":
    main()
