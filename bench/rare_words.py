"""Words Flickr8k barely knew: single-noun queries for nouns its training captions used a
few times, on one split, for each setting of the concept channel's word weighting.

    python bench/rare_words.py --split dev --halfway 0,2,5,10,20 --weights 1,2
    python bench/rare_words.py --split test --halfway 5 --weights 1 --out runs/rare.test.json

A query is "a NOUN" for every noun seen ``--min-count``..``--max-count`` times in the
checkpoint's training captions that at least ``--min-photos`` photos of the split mention
(a photo is relevant when one of its captions has the word); P@5 is reported beside the
best possible (min(relevant, 5) / 5) and the split's standard rsum, so a setting that
helps rare words at the expense of ordinary captions shows it. ``halfway`` 0 is the step
rule the shipped channel used before (rare = 2). (docs/RESULTS.md, "Words Flickr8k barely
knew".)
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from groundsearch.common.settings import get_settings
from groundsearch.model.data.held_out_concepts import words_of
from groundsearch.model.runtime.captioning.entry_level import EntryLevel
from groundsearch.model.runtime.concepts import ConceptChannel
from groundsearch.model.training.evaluation.held_out import ranked_query_metrics
from groundsearch.model.training.evaluation.retrieval import retrieval_metrics

sys.path.insert(0, str(Path(__file__).parent))
from concept_sweep import load_split

from common import floats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=None, help="default: the shipped one")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--weights", type=floats, default=[1.0])
    ap.add_argument("--halfway", type=floats, default=[0.0, 5.0])
    ap.add_argument("--names", default="imagenet", help="imagenet, entry, both (a,b)")
    ap.add_argument("--min-count", type=int, default=2)
    ap.add_argument("--max-count", type=int, default=30)
    ap.add_argument("--min-photos", type=int, default=2)
    ap.add_argument(
        "--seen-words",
        action="store_true",
        help="only nouns some ImageNet class is called by (model/artifacts/entry_level.tsv): "
        "the things the backbone was taught to see",
    )
    ap.add_argument("--out", type=Path, default=None, help="JSON of every row and query")
    args = ap.parse_args()

    checkpoint = args.checkpoint or get_settings().default_checkpoint
    model, ds, feats, trees, parse = load_split(checkpoint, args.split)
    assert model.concepts is not None
    channel, base = model.concepts, model.concepts.config
    counts = channel.trained
    links = np.asarray(ds.caption_image)

    mentioned: dict[str, set[int]] = {}
    for caption, photo in zip(ds.captions, ds.caption_image, strict=True):
        for w in words_of(caption):
            if args.min_count <= counts.get(w, 0) <= args.max_count:
                mentioned.setdefault(w, set()).add(int(photo))
    words = sorted(w for w, p in mentioned.items() if len(p) >= args.min_photos)
    if args.seen_words:
        seen = set(EntryLevel.load().vocabulary)
        words = [w for w in words if w in seen or w.rstrip("s") in seen]
    queries = parse([f"a {w}" for w in words])
    nouns = [
        (w, t)
        for w, t in zip(words, queries, strict=True)
        if any(n.upos == "NOUN" and n.text.lower() == w for n in t)
    ]
    relevant = [mentioned[w] for w, _ in nouns]
    best = float(np.mean([100.0 * min(len(r), 5) / 5 for r in relevant]))
    print(
        f"{len(nouns)} nouns seen {args.min_count}-{args.max_count} times in training, "
        f"each mentioned for ≥ {args.min_photos} {args.split} photos; best possible P@5 "
        f"{best:.1f}"
    )

    rows = []
    grid = [(n, h, w) for n in args.names.split(",") for h in args.halfway for w in args.weights]
    for names, halfway, weight in grid:
        config = replace(base, weight=weight, halfway=halfway, names=names)
        channel = ConceptChannel(model.backbone, config, counts)
        model.concepts = channel if weight > 0 else None
        photos = model.embed_images(feats)
        rsum = retrieval_metrics(photos @ model.embed_sentences(trees).T, links)["rsum"]
        y = model.embed_sentences([t for _, t in nouns])
        per = ranked_query_metrics(y @ photos.T, relevant)
        row = {
            "halfway": halfway,
            "names": names,
            "weight": weight,
            "rsum": round(rsum, 1),
            "rare_p@5": round(float(np.mean([m["p@5"] for m in per])), 1),
            "rare_r@10": round(float(np.mean([m["r@10"] for m in per])), 1),
            "best_p@5": round(best, 1),
            "at_zero": sum(m["p@5"] == 0 for m in per),
            "queries": len(per),
        }
        print(json.dumps(row))
        row["per_query"] = [
            {"word": w, "count": counts.get(w, 0), **m}
            for (w, _), m in zip(nouns, per, strict=True)
        ]
        rows.append(row)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
