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

``k`` and ``λ`` (one for each direction) are chosen on the mixed dev as ``fit-hubness``
chooses them (``model.training.hubness``: banks of 10,000, the mean of Flickr8k dev's and
cc-web dev's R sums); then Flickr8k test and cc-web dev are scored with them, beside the
uncorrected scores. Embeddings are cached in ``--work``
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
from groundsearch.model.training.hubness import DevSplit, bank_rows, choose, recall_sum

#: The collections' splits read: the bank's (train), the selection's and the reports'.
SPLITS = (
    ("flickr8k", "train"),
    ("cc-web", "train"),
    ("flickr8k", "dev"),
    ("cc-web", "dev"),
    ("flickr8k", "test"),
)
#: Candidate depths: the correction re-ranks only a query's best ``M`` by the raw score.
DEPTHS = (10, 20, 50, 100)


def within_depth(raw: np.ndarray, fixed: np.ndarray, depth: int, axis: int) -> np.ndarray:
    """``fixed`` scores for each query's ``depth`` best raw candidates (queries along
    ``axis`` of photos × captions), the rest after them in their raw order."""
    order = np.argsort(-raw, axis=1 - axis, kind="stable")
    top = np.take(order, np.arange(min(depth, raw.shape[1 - axis])), axis=1 - axis)
    inside = np.zeros(raw.shape, bool)
    np.put_along_axis(inside, top, True, axis=1 - axis)
    return np.where(inside, fixed, raw - 1e3)


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
    """Each side's setting chosen on the mixed dev (``model.training.hubness.choose``, as
    ``fit-hubness`` chooses), and the rsums of the report splits with and without it."""
    train = ("flickr8k-train", "cc-web-train")
    banks = {}
    for side, key in (("photos", "y"), ("captions", "v")):  # a photo's bank is captions
        rows = bank_rows([len(space[n][key]) for n in train], bank, seed)
        banks[side] = np.concatenate([space[n][key][r] for n, r in zip(train, rows, strict=True)])
    devs = [
        DevSplit(name, space[name]["v"], space[name]["y"], space[name]["ci"])
        for name in ("flickr8k-dev", "cc-web-dev")
    ]
    chosen = {side: choose(devs, banks[side], side) for side in banks}  # fit-hubness's grid
    targets = ("flickr8k-dev", "cc-web-dev", "flickr8k-test")
    raw_sums, fixed_sums, depths = {}, {}, {}
    for split in targets:
        y, v, ci = space[split]["y"], space[split]["v"], space[split]["ci"]
        raw = v @ y.T
        cp, cc = chosen["photos"], chosen["captions"]
        t2i = raw - cp["weight"] * bank_means(v, banks["photos"], cp["k"])[:, None]
        i2t = raw - cc["weight"] * bank_means(y, banks["captions"], cc["k"])[None, :]
        raw_sums[split] = round(recall_sum(raw, ci, "t2i") + recall_sum(raw, ci, "i2t"), 1)
        fixed_sums[split] = round(recall_sum(t2i, ci, "t2i") + recall_sum(i2t, ci, "i2t"), 1)
        depths[split] = {
            str(m): round(recall_sum(within_depth(raw, t2i, m, 1), ci, "t2i")
                          + recall_sum(within_depth(raw, i2t, m, 0), ci, "i2t"), 1)
            for m in DEPTHS
        }  # fmt: skip
    v, y = space["flickr8k-test"]["v"], space["flickr8k-test"]["y"]
    start = time.perf_counter()
    bank_means(v, banks["photos"], chosen["photos"]["k"])
    penalty_s = time.perf_counter() - start
    start = time.perf_counter()
    np.argsort(-(v @ y.T), axis=0)  # the reference: every caption's ranking of the photos
    raw_s = time.perf_counter() - start
    return {
        "bank": {"captions": len(banks["photos"]), "photos": len(banks["captions"])},
        "seconds": {
            "penalties_of_1000_test_photos": round(penalty_s, 4),
            "reference_5000_captions_rank_1000_photos": round(raw_s, 4),
        },
        "chosen": {side: {"k": c["k"], "weight": c["weight"]} for side, c in chosen.items()},
        "rsum_raw": raw_sums,
        "rsum_corrected": fixed_sums,
        "rsum_corrected_within_depth": depths,
        "mixed_dev": {
            "raw": round(sum(c["raw"]["mean"] for c in chosen.values()), 1),
            "corrected": round(sum(c["best"]["mean"] for c in chosen.values()), 1),
        },
        "grid": {side: c["grid"] for side, c in chosen.items()},
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
