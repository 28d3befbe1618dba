"""How small can a re-rank store be at 100M vectors' density? A probe for docs/BENCHMARKS.md.

At 100M, ``bench/scale.py``'s gallery holds ~2,060 noisy copies of each real vector and a
query's exact top 10 are copies of one of them: only a re-rank store precise enough to
order those copies reaches recall@10 ≥ 0.9. This emulates that density in memory: the
query's nearest real vectors and others (600 in all), 2,060 copies each made as
``bench/scale.py`` makes them (1.24M vectors), the exact top 10 of its 300 queries, and —
given the best candidates (the exact top 4,000, more than a query's copies) — recall@10
when they are re-ranked from float16 copies, from float16 PCA projections of ``r``
dimensions (``2r`` bytes a vector; PCA fitted on 20,000 real vectors), from FAISS's
scalar-quantised stores (8, 6 and 4 bits a dimension) and from PQ64 codes of each copy's
residual to its own real vector (what an inverted file coding residuals could do at best,
were every real vector a centroid); and from the stores of FAISS factory strings given to
``--factories`` (``;``-separated, each a codec's ``sa_encode``/``sa_decode``: a PCA, a PCA
with a random rotation, an inverted file's residuals in front of a scalar quantiser),
trained on 200,000 synthetic copies of every real vector, as a 100M build's sample is (with
``--factories``, those stores alone):

    python bench/rerank_density.py --base /tmp/g8k
    python bench/rerank_density.py --base /tmp/g8k --dims '' --factories \
        'PCAR448,SQ8;PCAR512,SQ8;IVF4096,SQ8;PCA448,IVF4096,SQ8'
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from scale import load_base, noise_scale

COPIES = 2060
REAL = 600
CANDIDATES = 4000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, default=Path("runs/scale/flickr8k-all"))
    ap.add_argument("--dims", default="64,128,192,256,384", help="PCA widths ('' for none)")
    ap.add_argument("--factories", default="", help="FAISS codecs to try, ';'-separated")
    args = ap.parse_args()
    base, queries = load_base(args.base)
    tau, d = noise_scale(base), base.shape[1]
    rng = np.random.default_rng(1)
    nearest = np.argmax(queries @ base.T, axis=1)
    chosen = np.unique(np.concatenate([nearest, rng.choice(len(base), REAL, replace=False)]))
    x = np.repeat(base[chosen[:REAL]], COPIES, axis=0)
    x += rng.normal(scale=tau / np.sqrt(d), size=x.shape).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    scores = queries @ x.T
    exact = np.argsort(-scores, axis=1)[:, :10]
    candidates = np.argpartition(-scores, CANDIDATES, axis=1)[:, :CANDIDATES]
    del scores

    def recall(store: np.ndarray, project: np.ndarray | None = None) -> float:
        found = []
        for q, cand, truth in zip(queries, candidates, exact, strict=True):
            v = q if project is None else project @ q
            top = cand[np.argsort(-(store[cand].astype(np.float32) @ v))[:10]]
            found.append(len(set(top.tolist()) & set(truth.tolist())) / 10)
        return float(np.mean(found))

    print(f"{len(x):,} vectors ({REAL} real × {COPIES} copies, tau {tau:.3f})")
    print(f"float16 copies ({2 * d} B a vector): recall@10 {recall(x.astype(np.float16)):.3f}")
    mean = base.mean(axis=0)
    sample = base[rng.choice(len(base), min(20000, len(base)), replace=False)] - mean
    axes = np.linalg.svd(sample, full_matrices=False)[2]
    for r in (int(s) for s in args.dims.split(",") if s):
        project = axes[:r]
        store = ((x - mean) @ project.T).astype(np.float16)
        print(f"PCA {r} float16 ({2 * r} B a vector): recall@10 {recall(store, project):.3f}")
    if args.factories:
        sample = base[rng.integers(0, len(base), 200_000)]
        sample += rng.normal(scale=tau / np.sqrt(d), size=sample.shape).astype(np.float32)
        sample /= np.linalg.norm(sample, axis=1, keepdims=True)
        for spec in args.factories.split(";"):
            codec = faiss.index_factory(d, spec, faiss.METRIC_INNER_PRODUCT)
            codec.train(sample)
            parts = (x[lo : lo + 100_000] for lo in range(0, len(x), 100_000))
            store = np.concatenate([codec.sa_decode(codec.sa_encode(p)) for p in parts])
            print(f"{spec} ({codec.sa_code_size()} B a vector): recall@10 {recall(store):.3f}")
        del sample, store
        return
    train = x[rng.choice(len(x), 100_000, replace=False)]
    for bits in (8, 6, 4):
        sq = faiss.ScalarQuantizer(d, getattr(faiss.ScalarQuantizer, f"QT_{bits}bit"))
        sq.train(train)
        store = sq.decode(sq.compute_codes(x))
        print(f"SQ{bits} ({sq.code_size} B a vector): recall@10 {recall(store):.3f}")
    del train, store
    owner = np.repeat(np.arange(REAL), COPIES)  # the row of each copy's real vector
    real = base[chosen[:REAL]]
    width = -(-d // 64) * 64  # PQ64 needs a dimension 64 divides: zeros appended
    pq = faiss.ProductQuantizer(width, 64, 8)
    rows = np.sort(rng.choice(len(x), 100_000, replace=False))
    pq.train(np.pad(x[rows] - real[owner[rows]], ((0, 0), (0, width - d))))
    for lo in range(0, len(x), 100_000):  # x becomes its decoded residual codes, by chunks
        part = slice(lo, lo + 100_000)
        residual = np.pad(x[part] - real[owner[part]], ((0, 0), (0, width - d)))
        x[part] = real[owner[part]] + pq.decode(pq.compute_codes(residual))[:, :d]
    store = x
    print(f"PQ64 of the residual to its real vector (64 B): recall@10 {recall(store):.3f}")


if __name__ == "__main__":
    main()
