"""Hubness correction of the joint space's scores, measured both ways for one model or an
ensemble (the service's: ``model.runtime.hubness``, chosen by ``groundsearch fit-hubness``).

    python bench/hubness.py model/artifacts/sdt-rnn.pt --out runs/bench/hubness.json
    python bench/hubness.py A.pt B.pt C.pt          # an ensemble: the members' mean score

A few photos of a joint space are near every sentence ("hubs") and come first for queries
they do not fit; a few sentences likewise for photos. CSLS (Conneau et al. 2018, the
querybank normalisation of Bogolin et al. 2022 in its simplest form) scores a pair
``s(q, x) − λ·r(x)``, where ``r(x)`` is the mean of ``x``'s ``k`` largest scores against a
bank of queries: for a photo, a sample of the training captions (Flickr8k train + cc-web
train); for a sentence, a sample of the training photos. No test query is read, and a
query's own term is the same for all its candidates, so it is left out.

``k`` and ``λ`` (one for each direction) are chosen on the mixed dev (the mean of Flickr8k
dev's and cc-web dev's rsums, as ``loop.dev_score``); then Flickr8k test and cc-web dev
are scored with them, beside the uncorrected scores. Embeddings are cached in ``--work``
by checkpoint digest. (docs/RESULTS.md, "Hubness correction".)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from groundsearch.model.runtime.hubness import bank_means
from groundsearch.model.training.evaluation.retrieval import retrieval_metrics

#: The collections' splits read: the bank's (train), the selection's and the reports'.
SPLITS = (
    ("flickr8k", "train"),
    ("cc-web", "train"),
    ("flickr8k", "dev"),
    ("cc-web", "dev"),
    ("flickr8k", "test"),
)
KS = (10, 25, 50, 100, 200)
#: Candidate depths: the correction re-ranks only a query's best ``M`` by the raw score.
DEPTHS = (10, 20, 50, 100)
LAMBDAS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1)


def corrected(
    scores: np.ndarray, photo_penalty: np.ndarray, caption_penalty: np.ndarray, lam: float
) -> tuple[np.ndarray, np.ndarray]:
    """Photos × captions scores for image search (each photo's penalty taken off) and
    for description (each caption's)."""
    return scores - lam * photo_penalty[:, None], scores - lam * caption_penalty[None, :]


def within_depth(raw: np.ndarray, fixed: np.ndarray, depth: int, axis: int) -> np.ndarray:
    """``fixed`` scores for each query's ``depth`` best raw candidates (queries along
    ``axis`` of photos × captions), the rest after them in their raw order."""
    order = np.argsort(-raw, axis=1 - axis, kind="stable")
    top = np.take(order, np.arange(min(depth, raw.shape[1 - axis])), axis=1 - axis)
    inside = np.zeros(raw.shape, bool)
    np.put_along_axis(inside, top, True, axis=1 - axis)
    return np.where(inside, fixed, raw - 1e3)


def direction_sums(scores: np.ndarray, caption_image: np.ndarray) -> tuple[float, float]:
    """R@1 + R@5 + R@10 of image search (t2i) and of description (i2t)."""
    m = retrieval_metrics(scores, caption_image)
    return tuple(sum(m[d][f"R@{k}"] for k in (1, 5, 10)) for d in ("t2i", "i2t"))  # type: ignore[return-value]


Space = dict[str, dict[str, np.ndarray]]


def joined(members: list[Space]) -> Space:
    """Several models' spaces as one whose inner products are their mean scores (each
    member's vectors side by side, over √members)."""
    scale = 1.0 / np.sqrt(len(members))
    return {
        split: {
            "y": np.hstack([m[split]["y"] for m in members]) * scale,
            "v": np.hstack([m[split]["v"] for m in members]) * scale,
            "ci": members[0][split]["ci"],
        }
        for split in members[0]
    }


def embed(checkpoint: Path, work: Path) -> Space:
    """The checkpoint's photo (``v``) and caption (``y``) vectors of every split, cached."""
    from groundsearch.cli.common import make_parser
    from groundsearch.common.settings import get_settings
    from groundsearch.model.data.sources import load_source, parse_source
    from groundsearch.model.runtime.checkpoints import load_checkpoint
    from groundsearch.model.runtime.images.features import FeatureExtractor
    from groundsearch.model.training.corpus import build_split

    digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest()[:16]
    folder = work / f"{checkpoint.stem}-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    s, parser, model, out = get_settings(), None, None, {}
    for name, split in SPLITS:
        path = folder / f"{name}-{split}.npz"
        if not path.is_file():
            if model is None:
                parser = make_parser()
                model = load_checkpoint(checkpoint, parser=parser.version)
                extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=s.cache_dir)
            ds = load_source(parse_source(name, s.data_dir), split, extractor.identity)
            sp = build_split(ds, parser, extractor, False, model=model)
            np.savez(
                path,
                y=model.embed_sentences(sp.trees).astype(np.float32),
                v=model.embed_images(sp.features).astype(np.float32),
                ci=np.asarray(sp.caption_image),
            )
        with np.load(path) as d:
            out[f"{name}-{split}"] = {key: d[key] for key in ("y", "v", "ci")}
    return out


def measure(space: Space, bank: int, seed: int = 0) -> dict[str, Any]:
    """The grid on the mixed dev, the setting chosen for each direction, and the rsums
    with and without it."""
    rng = np.random.default_rng(seed)
    train = ("flickr8k-train", "cc-web-train")

    def sample(rows: list[np.ndarray]) -> np.ndarray:
        # ``bank`` rows in all, drawn from each collection in proportion to its rows
        total = sum(len(r) for r in rows)
        return np.concatenate(
            [r[rng.choice(len(r), round(min(bank, total) * len(r) / total), replace=False)]
             for r in rows]
        )  # fmt: skip

    captions = sample([space[n]["y"] for n in train])
    photos = sample([space[n]["v"] for n in train])
    targets = ("flickr8k-dev", "cc-web-dev", "flickr8k-test")
    grid: list[dict[str, Any]] = [{"k": k, "lambda": lam} for k in KS for lam in LAMBDAS]
    for split in targets:
        y, v, ci = space[split]["y"], space[split]["v"], space[split]["ci"]
        raw = v @ y.T
        for k in KS:
            photo_pen, caption_pen = bank_means(v, captions, k), bank_means(y, photos, k)
            for row in grid:
                if row["k"] == k:
                    t2i, i2t = corrected(raw, photo_pen, caption_pen, row["lambda"])
                    row[split] = {
                        "t2i": round(direction_sums(t2i, ci)[0], 2),
                        "i2t": round(direction_sums(i2t, ci)[1], 2),
                    }

    def mixed(row: dict[str, Any], d: str) -> float:
        return (row["flickr8k-dev"][d] + row["cc-web-dev"][d]) / 2

    best = {d: max(grid, key=lambda r, d=d: mixed(r, d)) for d in ("t2i", "i2t")}
    raw_row = next(r for r in grid if r["lambda"] == 0.0)
    depths: dict[str, dict[str, float]] = {}
    for split in targets:
        y, v, ci = space[split]["y"], space[split]["v"], space[split]["ci"]
        raw = v @ y.T
        bt, bi = best["t2i"], best["i2t"]
        t2i = raw - bt["lambda"] * bank_means(v, captions, bt["k"])[:, None]
        i2t = raw - bi["lambda"] * bank_means(y, photos, bi["k"])[None, :]
        depths[split] = {
            str(m): round(direction_sums(within_depth(raw, t2i, m, 1), ci)[0]
                          + direction_sums(within_depth(raw, i2t, m, 0), ci)[1], 1)
            for m in DEPTHS
        }  # fmt: skip

    def rsums(t2i_row: dict[str, Any], i2t_row: dict[str, Any]) -> dict[str, float]:
        return {s: round(t2i_row[s]["t2i"] + i2t_row[s]["i2t"], 1) for s in targets}

    v, y = space["flickr8k-test"]["v"], space["flickr8k-test"]["y"]
    start = time.perf_counter()
    bank_means(v, captions, best["t2i"]["k"])
    penalty_s = time.perf_counter() - start
    start = time.perf_counter()
    np.argsort(-(v @ y.T), axis=0)  # the reference: every caption's ranking of the photos
    raw_s = time.perf_counter() - start
    return {
        "bank": {"captions": len(captions), "photos": len(photos)},
        "seconds": {
            "penalties_of_1000_test_photos": round(penalty_s, 4),
            "reference_5000_captions_rank_1000_photos": round(raw_s, 4),
        },
        "chosen": {d: {"k": best[d]["k"], "lambda": best[d]["lambda"]} for d in best},
        "rsum_raw": rsums(raw_row, raw_row),
        "rsum_corrected": rsums(best["t2i"], best["i2t"]),
        "rsum_corrected_within_depth": depths,
        "mixed_dev": {
            "raw": round(mixed(raw_row, "t2i") + mixed(raw_row, "i2t"), 1),
            "corrected": round(mixed(best["t2i"], "t2i") + mixed(best["i2t"], "i2t"), 1),
        },
        "grid": grid,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", type=Path, help="one model, or an ensemble")
    ap.add_argument("--bank", type=int, default=10_000, help="bank captions (and photos)")
    ap.add_argument("--work", type=Path, default=Path("runs/bench/hubness"))
    ap.add_argument("--out", type=Path, help="write the figures here too")
    args = ap.parse_args(argv)
    space = joined([embed(c, args.work) for c in args.checkpoints])
    result = {"checkpoints": [str(c) for c in args.checkpoints], **measure(space, args.bank)}
    text = json.dumps(result, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    shown = {k: v for k, v in result.items() if k != "grid"}
    print(json.dumps(shown, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
