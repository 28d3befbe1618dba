"""The search stage of /search (rank, judge, page): one pass against the paging loop it
replaced, on the same queries in the same run.

    python bench/search_stage.py                  # the default gallery, and 100,000 photos

**1,000 photos**: the service's own ``Search.run`` on the default gallery (`groundsearch
index --flickr8k`: the Flickr8k test photos), relevance with its per-hit evidence as
served; the stage time is ``timings_ms["search"]``. **100,000 photos**: a flat
inner-product index of the gallery's 1,000 photo vectors and 99,000 near-copies (each a
real vector plus Gaussian noise of the size of real nearest-neighbour gaps, renormalised),
with the served relevance model on the scores (no evidence: the copies have no stored
classes); the time is fetch + judge + page. Queries: distinct Flickr8k training captions,
encoded beforehand. ``before`` is the loop this replaced (kept below as
``doubling_paginate``: fetch 20, judge, double until the page and the total are known);
``after`` is ``index.ranking.pages.paginate``. Both run query by query, alternating. Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import faiss
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from search_latency import sentences
from service_load import DEFAULT_DATA

from common import latency, machine
from groundsearch.index.ranking import pages, photo_pages
from groundsearch.index.ranking.hits import Hit
from groundsearch.index.ranking.pages import _above, _after, _page, _sort_key
from groundsearch.index.ranking.photo_pages import PageAsk
from groundsearch.service.core.capabilities.search import Search
from groundsearch.service.core.components import Components
from groundsearch.service.core.settings import ServiceSettings


def doubling_paginate(fetch, judge, k, order="relevance", threshold=None, cursor=None,
                      query="", window=pages.WINDOW, monotone=True):  # fmt: skip
    """service.pages.paginate before the one-pass ranking (commit b62c0a0), verbatim but
    for its hits (``Hit`` since)."""
    n = max(20, 2 * k + (cursor.served if cursor else 0))
    while True:
        hits = list(fetch(n))
        for hit, r in zip(hits, judge([h.score for h in hits]), strict=True):
            hit.relevance = r
        ended = len(hits) < n
        below = monotone and bool(hits) and not _above(hits[-1], threshold)
        total_ready = ended or below or n >= window
        flags = [rank < window and _above(h, threshold) for rank, h in enumerate(hits)]
        good = [h for h, ok in zip(hits, flags, strict=True) if ok]
        if order == "relevance":
            last = hits[-1].score if hits else math.inf
            sure = [(_sort_key(order, h, ok), h) for h, ok in zip(hits, flags, strict=True)
                    if ended or ok or h.score > last]  # fmt: skip
        elif total_ready:
            sure = [(_sort_key(order, h), h) for h in good]
        else:
            n = min(2 * n, window)
            continue
        ranked = sorted(sure, key=lambda kh: kh[0])
        pool = [kh for kh in ranked if cursor is None or _after(kh[0], cursor)]
        if order == "relevance" and not ((len(pool) > k or ended) and total_ready):
            n = max(window, n) if len(pool) > k or ended else 2 * n
            continue
        return _page(order, pool, k, len(good), ended or below, cursor, query)


VARIANTS = {"before": doubling_paginate, "after": pages.paginate}


def served(components: Components, texts: list[str], k: int) -> dict:
    """The search stage of Search.run on the served gallery, before and after."""
    search = Search(components.queries, components.gallery, components.stages, components.judge)
    for text in texts:  # encode (and parse) every query first: the stage is what is timed
        search.run(text, PageAsk(k))
    ms: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for text in texts:
        for name, paginate in VARIANTS.items():
            photo_pages.paginate = paginate  # type: ignore[assignment]
            _, timings, _ = search.run(text, PageAsk(k))
            ms[name].append(timings["search"])
    photo_pages.paginate = pages.paginate
    return {name: latency(v, digits=3) for name, v in ms.items()}


def synthetic(components: Components, texts: list[str], size: int, k: int) -> dict:
    """Fetch + judge + page over a flat index of ``size`` real-like photo vectors."""
    gallery = components.gallery
    real = gallery.image_vectors(gallery.image_ids()).astype(np.float32)
    rng = np.random.default_rng(0)
    gaps = np.sort(real @ real.T, axis=1)[:, -2]  # each vector's nearest other: cosine
    tau = float(np.median(np.sqrt(np.maximum(0.0, 2 - 2 * gaps))))
    copies = real[rng.integers(0, len(real), size - len(real))]
    copies += rng.normal(0, tau / math.sqrt(real.shape[1]), copies.shape).astype(np.float32)
    copies /= np.linalg.norm(copies, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(real.shape[1])
    index.add(np.vstack([real, copies]))
    faiss.omp_set_num_threads(1)
    judge = components.judge
    vectors = [components.queries.vector(t, {}) for t in texts]
    ms: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for text, vec in zip(texts, vectors, strict=True):

        def fetch(n: int, v: np.ndarray = vec) -> list[Hit[None]]:
            scores, ids = index.search(v[None, :].astype(np.float32), n)
            return [Hit(int(i), float(s)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]

        def relevance(scores, v: np.ndarray = vec, t: str = text):
            return judge.of("text-image", scores, v, t)

        for name, paginate in VARIANTS.items():
            start = time.perf_counter()
            paginate(fetch, relevance, k, "relevance", judge.threshold(None, False, text))
            ms[name].append(1000 * (time.perf_counter() - start))
    return {name: latency(v, digits=3) for name, v in ms.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--size", type=int, default=100_000, help="photos of the synthetic index")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Flickr8k folder")
    args = ap.parse_args()
    settings = ServiceSettings(caption_bank="none")  # type: ignore[call-arg]
    components = Components.load(settings)
    texts = sentences(args.data, args.queries, seed=1)
    photos = components.gallery.counts()["images"]
    report = {
        "machine": machine(),
        "queries": len(texts),
        f"{photos} photos (served gallery, Search.run)": served(components, texts, args.k),
        f"{args.size} photos (flat index, fetch + judge + page)": synthetic(
            components, texts, args.size, args.k
        ),
    }
    for row in report.values():
        if isinstance(row, dict) and "after" in row:
            row["p50_ratio"] = round(row["after"]["p50_ms"] / row["before"]["p50_ms"], 3)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
