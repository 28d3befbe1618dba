"""The search stage of /search (rank, judge, page) of this checkout against another's, on
the same queries in the same run.

    python bench/search_stage.py --before TREE    # TREE: an older checkout's package tree

**1,000 photos**: the service's own ``Search.run`` on the default gallery (`groundsearch
index --flickr8k`: the Flickr8k test photos), relevance with its per-hit evidence as
served; the stage time is ``timings_ms["search"]``, and the part of it spent in FAISS and
judging (``Gallery.rank_images``, ``Judge.evidence``, ``Judge.relevance``). Another
gallery by ``GROUNDSEARCH_INDEX_DIR`` (e.g. bench/big_gallery.py's 100,000 photos).
**100,000 photos** (unless the gallery holds as many): a flat
inner-product index of the gallery's 1,000 photo vectors and 99,000 near-copies (each a
real vector plus Gaussian noise of the size of real nearest-neighbour gaps, renormalised),
with the served relevance model on the scores (no evidence: the copies have no stored
classes); the time is fetch + judge + page (``index.ranking.pages.paginate``). Queries:
distinct Flickr8k training captions, encoded beforehand (the stage is what is timed).

Each code runs in a process of its own (TREE first on ``PYTHONPATH``, laid out as
``make typecheck`` lays a checkout: ``groundsearch/{model,index,service,common}``), in
``--rounds`` blocks alternating with the other's, each block the same queries. Prints
JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from search_latency import sentences
from service_load import DEFAULT_DATA

from common import latency, machine


def served(components, texts: list[str], k: int) -> tuple[list[float], list[float]]:
    """The search stage of ``Search.run`` on the served gallery, per query (ms), and the
    part of it in FAISS and judging (``Gallery.rank_images``, ``Judge.evidence`` and
    ``Judge.relevance``, timed by wrapping them)."""
    from groundsearch.index.ranking.photo_pages import PageAsk
    from groundsearch.service.core.capabilities.search import Search

    c = components
    spent = [0.0]

    def timed(owner: object, name: str) -> None:
        inner = getattr(owner, name)

        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[0] += 1000 * (time.perf_counter() - start)

        object.__setattr__(owner, name, call)  # the judge is a frozen dataclass

    timed(c.gallery, "rank_images")
    timed(c.judge, "evidence")
    timed(c.judge, "relevance")
    search = Search(c.queries, c.gallery, c.stages, c.judge)
    for text in texts:  # encode (and parse) every query first
        search.run(text, PageAsk(k))
    stage, judged = [], []
    for text in texts:
        spent[0] = 0.0
        stage.append(search.run(text, PageAsk(k))[1]["search"])
        judged.append(spent[0])
    return stage, judged


def synthetic(components, texts: list[str], size: int, k: int) -> list[float]:
    """Fetch + judge + page over a flat index of ``size`` real-like photo vectors (ms)."""
    import faiss
    import numpy as np

    from groundsearch.index.hits import Hit
    from groundsearch.index.ranking import pages

    gallery, judge = components.gallery, components.judge
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
    arrays = hasattr(pages, "Ranking")  # this checkout's pages read arrays
    ms = []
    for text in texts:
        vec = components.queries.vector(text, {})

        def fetch(n: int, v: np.ndarray = vec):
            scores, ids = index.search(v[None, :].astype(np.float32), n)
            pairs = [
                (i, s) for s, i in zip(scores[0].tolist(), ids[0].tolist(), strict=True) if i >= 0
            ]
            return pages.Ranking.of(pairs) if arrays else [Hit(i, s) for i, s in pairs]

        def relevance(ranked, v: np.ndarray = vec, t: str = text):
            if arrays:
                return judge.relevance("text-image", ranked.scores, v, t)
            return judge.of("text-image", ranked, v, t)

        start = time.perf_counter()
        pages.paginate(fetch, relevance, k, "relevance", judge.threshold(None, False, text))
        ms.append(1000 * (time.perf_counter() - start))
    return ms


def child(args: argparse.Namespace) -> None:
    """One block in this process's code: per-query ms of both measures, as JSON."""
    from groundsearch.service.core.components import Components
    from groundsearch.service.core.settings import ServiceSettings

    components = Components.load(ServiceSettings(caption_bank="none"))  # type: ignore[call-arg]
    texts = sentences(args.data, args.queries, seed=1)
    out = {"photos": components.gallery.counts()["images"]}
    out["served"], out["faiss_judging"] = served(components, texts, args.k)
    big = args.size > out["photos"]  # a gallery this size already: its own figures say it
    out["synthetic"] = synthetic(components, texts, args.size, args.k) if big else []
    components.close()
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="a package tree of older code")
    ap.add_argument("--queries", type=int, default=150)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--size", type=int, default=100_000, help="photos of the synthetic index")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="Flickr8k folder")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    variants = {"after": {}}
    if args.before:
        variants = {"before": {"PYTHONPATH": str(args.before.resolve())}} | variants
    measures = ("served", "faiss_judging", "synthetic")
    runs: dict[str, dict[str, list[float]]] = {v: {m: [] for m in measures} for v in variants}
    photos = 0
    argv = [sys.executable, __file__, "--child", "--queries", str(args.queries)]
    argv += ["--size", str(args.size), "--k", str(args.k), "--data", str(args.data)]
    for _ in range(args.rounds):
        for name, env in variants.items():
            done = subprocess.run(
                argv, env={**os.environ, **env}, capture_output=True, text=True, check=True
            )
            block = json.loads(done.stdout.strip().splitlines()[-1])
            photos = block["photos"]
            for measure in measures:
                runs[name][measure] += block[measure]
    report: dict = {"machine": machine(), "queries": args.queries, "rounds": args.rounds}
    for measure, title in (
        ("served", f"{photos} photos (served gallery, Search.run)"),
        ("faiss_judging", f"{photos} photos: FAISS and judging within it"),
        ("synthetic", f"{args.size} photos (flat index, fetch + judge + page)"),
    ):
        if not all(runs[name][measure] for name in variants):
            continue
        row = {name: latency(runs[name][measure], digits=3) for name in variants}
        if "before" in row:
            row["p50_ratio"] = round(row["after"]["p50_ms"] / row["before"]["p50_ms"], 3)
        report[title] = row
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
