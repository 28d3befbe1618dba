"""What naming the classifier's words costs ``/describe``, beside one CNN pass, in the
same run: per photo, the CNN pass, the joint encoding, today's generation (free beam
search) and the new one (classifier + constrained search where a word is confident).

    python bench/describe_cost.py [--photos 40] [--split test] [--beam 3]

Prints the p50/p90 of each stage (ms) and the check: new p50 (CNN + encode + classify +
generate) ≤ 1.3 × CNN p50 + today's (encode + generate) p50.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from groundsearch.cli.common import make_parser
from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.captioning import load_decoder
from groundsearch.model.runtime.captioning.novel import NovelWords
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.images.photos import decode_photo
from groundsearch.model.runtime.tagger import WordTagger


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--photos", type=int, default=40)
    ap.add_argument("--split", default="test")
    ap.add_argument("--beam", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    s = get_settings()
    model = load_checkpoint(s.default_checkpoint, parser=make_parser().version)
    decoder = load_decoder(s.default_decoder)
    novel = NovelWords.for_decoder(
        decoder, model.backbone, tagger=WordTagger.load(backbone=model.backbone)
    )
    extractor = FeatureExtractor(model.backbone)  # no cache: a real pass each time
    ds = load_captioned_images(s.flickr8k_dir, split=args.split)
    # every 7th photo, so that some have a confident word the decoder does not know well
    rows = list(range(0, len(ds.images), max(len(ds.images) // args.photos, 1)))[: args.photos]
    times: dict[str, list[float]] = {k: [] for k in ("cnn", "encode", "old", "classify", "new")}
    constrained = 0
    bound: list[float] = []  # the new generation, on photos with a confident word
    for i in rows:
        image = decode_photo(ds.image_path(i))[0]
        t0 = time.perf_counter()
        features = extractor.embed_images([image])
        t1 = time.perf_counter()
        vec = model.embed_images(features)
        t2 = time.perf_counter()
        decoder.generate(vec, beam=args.beam)
        t3 = time.perf_counter()
        c = novel.constraints(features)
        t4 = time.perf_counter()
        decoder.generate(vec, beam=args.beam, constraints=c)
        t5 = time.perf_counter()
        constrained += bool(c.rows[0])
        if c.rows[0]:
            bound.append(1000 * (t5 - t3))
        for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4), strict=True):
            times[key].append(1000 * dt)
    p50 = {k: float(np.median(v)) for k, v in times.items()}
    p90 = {k: float(np.percentile(v, 90)) for k, v in times.items()}
    old_total = [
        a + b + c for a, b, c in zip(times["cnn"], times["encode"], times["old"], strict=True)
    ]
    new_total = [
        a + b + c + d
        for a, b, c, d in zip(
            times["cnn"], times["encode"], times["classify"], times["new"], strict=True
        )
    ]
    budget = 1.3 * p50["cnn"] + p50["encode"] + p50["old"]
    out = {
        "photos": len(rows),
        "constrained": constrained,
        "beam": args.beam,
        "threads": args.threads,
        "p50_ms": {k: round(v, 1) for k, v in p50.items()},
        "p90_ms": {k: round(v, 1) for k, v in p90.items()},
        "classify_and_generate_p50_ms_where_constrained": round(float(np.median(bound)), 1)
        if bound
        else None,
        "old_total_p50_ms": round(float(np.median(old_total)), 1),
        "new_total_p50_ms": round(float(np.median(new_total)), 1),
        "budget_ms": round(budget, 1),
        "within": bool(np.median(new_total) <= budget),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
