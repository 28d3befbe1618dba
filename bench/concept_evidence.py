"""How well does the classifier see the held-out concepts, and could one threshold serve them?

Two probes for docs/RESULTS.md ("Where issue 25 stands"):

1. For each held-out concept the ImageNet classes name, the classifier's evidence
   (``NounClasses.evidence``: its probability on the concept's classes among a photo's
   top 10, as galleries store it) on every test photo, against whether the photo's
   captions mention the concept (with its kinds): the AUROC, the positives' median, the
   best negative and the share of positives above it, and the train split's negatives'
   99.9th percentile (what a per-noun null would read).
2. From ``groundsearch evaluate-relevance``'s figures (``--figures``): the most absent
   concepts one threshold — even one chosen on those figures themselves — could answer
   "no match" while keeping ≥ 90 % of the present galleries' relevant top-5 hits, and
   what thresholds chosen per concept would reach.

    python bench/concept_evidence.py --figures docs/relevance-test.json
    python bench/concept_evidence.py --objects      # the object detector's (bench/detector/)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.data.held_out_concepts import HELD_OUT, photos_mentioning, with_kinds
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.evidence import NounClasses, top_classes
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.objects.detector import COCO, ObjectDetector

sys.path.insert(0, str(Path(__file__).parent))
from detector.evidence import ObjectNounClasses, object_classes, objects_path, read_objects

KEEP = 0.9


def classifier_table(checkpoint: Path, objects: bool = False) -> None:
    s = get_settings()
    model = load_checkpoint(checkpoint)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=s.cache_dir)
    detector = ObjectDetector.load(s.objects_dir, s.cache_dir) if objects else None
    # the detector's kinds alone (every kind's score), or the classifier's top classes
    table = ObjectNounClasses(read_objects(objects_path())) if objects else NounClasses.load()
    splits = {}
    for split in ("train", "test"):
        ds = load_captioned_images(s.flickr8k_dir, split=split)
        paths = [ds.image_path(i) for i in range(len(ds.images))]
        if detector is not None:
            seen = object_classes(detector.score_files(paths), k=len(COCO), floor=0.0)
        else:
            seen = top_classes(model.concepts.class_probabilities(extractor.embed_files(paths)))
        splits[split] = (ds, seen)
    head = ["test positives", "AUROC", "positives' median", "best negative", "positives above it"]
    print("| concept | " + " | ".join(head) + " | train null 99.9 % |")
    print("|---|---|---|---|---|---|---|")
    for concept, forms in with_kinds(HELD_OUT).items():
        named = table.nameable([concept])
        if not named:
            print(f"| {concept} | — | no {'kind' if objects else 'class'} names it | | | | |")
            continue
        rows = {}
        for split, (ds, (ids, probs)) in splits.items():
            e = table.evidence(named, ids, probs)
            assert e is not None
            pos = np.zeros(len(e), bool)
            pos[list(photos_mentioning(ds, forms))] = True
            rows[split] = (e, pos)
        e, pos = rows["test"]
        null = np.quantile(rows["train"][0][~rows["train"][1]], 0.999)
        worst = e[~pos].max()
        print(
            f"| {concept} | {pos.sum()} | {roc_auc_score(pos, e):.3f} | {np.median(e[pos]):.3f} "
            f"| {worst:.3f} | {np.mean(e[pos] > worst):.0%} | {null:.3f} |"
        )


def thresholds(figures: dict[str, Any]) -> None:
    part = figures["evidence"]
    queries = part["no_match"]["per_query"]
    relevant = [
        v
        for q in queries
        for v, r in zip(q["present_top5"], q["present_top5_relevant"], strict=True)
        if r
    ]
    best = (0.0, 0.0, 1.0)
    for t in sorted({q["absent_best"] + 1e-9 for q in queries} | set(relevant)):
        kept = float(np.mean([v >= t for v in relevant]))
        no_match = float(np.mean([q["absent_best"] < t for q in queries]))
        if kept >= KEEP and no_match > best[1]:
            best = (t, no_match, kept)
    print(
        f"\none threshold (default {part['threshold']}): at best {best[1]:.0%} of "
        f'{len(queries)} absent concepts "no match" keeping {best[2]:.1%} of {len(relevant)} '
        f"relevant top-5 hits (at {best[0]:.3f})"
    )
    # per concept: refuse the absent best, keep the relevant hits above it
    lost = sum(
        sum(
            v <= q["absent_best"]
            for v, r in zip(q["present_top5"], q["present_top5_relevant"], strict=True)
            if r
        )
        for q in queries
    )
    print(
        f'a threshold per concept (just above its absent best): 100% "no match", '
        f"{1 - lost / len(relevant):.1%} kept"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=Path("model/artifacts/sdt-rnn.pt"))
    ap.add_argument("--figures", type=Path, help="evaluate-relevance's JSON")
    ap.add_argument(
        "--objects",
        action="store_true",
        help="the object detector's evidence instead (its best score on the concept's "
        "COCO kinds: model/artifacts/noun_objects.tsv; groundsearch fetch-objects installs "
        "it)",
    )
    args = ap.parse_args()
    classifier_table(args.checkpoint, args.objects)
    if args.figures:
        thresholds(json.loads(args.figures.read_text()))


if __name__ == "__main__":
    main()
