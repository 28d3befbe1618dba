"""Sweep the concept channel's weight on a split: standard rsum and the held-out-concept
figures for each (weight, familiar, rare or halfway), the model's joint weights fixed.

    python bench/concept_sweep.py runs/concepts/sdt-heldout.pt --split dev \
        --weights 0,0.5,1,2 --familiar 0,0.25 --rare 2 --halfway 0,5,20

(docs/RESULTS.md, "Concepts Flickr8k never showed": how w was chosen on dev.)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from groundsearch.cli.common import make_parser
from groundsearch.common.settings import get_settings
from groundsearch.model.data import CaptionedImages, load_captioned_images
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.concepts import ConceptChannel, ConceptConfig
from groundsearch.model.runtime.embedder import JointEmbedder
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.training.corpus import TreesFn, text_trees
from groundsearch.model.training.evaluation.held_out import held_out_metrics
from groundsearch.model.training.evaluation.retrieval import retrieval_metrics

sys.path.insert(0, str(Path(__file__).parent))
from common import floats


def load_split(
    checkpoint: Path, split: str
) -> tuple[JointEmbedder, CaptionedImages, np.ndarray, list[DependencyTree], TreesFn]:
    """The checkpoint with its channel on, a Flickr8k split, its photos' cached features,
    its captions' trees and the text front door's parse (shared with rare_words.py)."""
    s = get_settings()
    parser = make_parser()
    parse = text_trees(parser)  # the text front door, over the parse cache
    model = load_checkpoint(checkpoint, parser=parser.version, concept_weight=1.0)
    assert isinstance(model, JointEmbedder) and model.concepts is not None
    ds = load_captioned_images(s.data_dir / "flickr8k", split=split)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=s.cache_dir)
    feats = extractor.embed_files([ds.image_path(i) for i in range(len(ds.images))])
    return model, ds, feats, parse(ds.captions), parse


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--split", default="dev")
    ap.add_argument("--weights", type=floats, default=[0.0, 0.5, 1.0, 2.0])
    ap.add_argument("--familiar", type=floats, default=[0.0])
    ap.add_argument("--rare", type=int, default=ConceptConfig.rare)
    ap.add_argument("--halfway", type=floats, default=[ConceptConfig.halfway])
    ap.add_argument("--names", default=ConceptConfig.names, help="imagenet, entry, both (a,b)")
    ap.add_argument("--tagger", type=floats, default=[ConceptConfig.tagger], help="its shares")
    args = ap.parse_args()

    model, ds, feats, trees, parse = load_split(args.checkpoint, args.split)
    assert model.concepts is not None
    channel = model.concepts
    links = np.asarray(ds.caption_image)
    grid = [
        (n, f, h, w, t)
        for t in args.tagger
        for n in args.names.split(",")
        for f in args.familiar
        for h in args.halfway
        for w in args.weights
    ]
    for names, familiar, halfway, weight, tagger in grid:
        channel = ConceptChannel(
            model.backbone,
            ConceptConfig(
                weight=weight,
                familiar=familiar,
                rare=args.rare,
                halfway=halfway,
                names=names,
                tagger=tagger,
            ),
            channel.trained,
        )
        model.concepts = channel if weight > 0 else None
        photos = model.embed_images(feats)
        rsum = retrieval_metrics(photos @ model.embed_sentences(trees).T, links)["rsum"]
        held = held_out_metrics(model.embed_sentences, photos, ds, trees, parse)
        row = {
            "weight": weight,
            "familiar": familiar,
            "rare": args.rare,
            "halfway": halfway,
            "names": names,
            "tagger": tagger,
            "rsum": rsum,
            "single_p@5": held["single"]["p@5"],
            "compositional_p@5": held["compositional"]["p@5"],
            "held_out_captions_r@10": held["captions"]["held_out"]["r@10"],
            "single_p@5_by_concept": {q["concept"]: q["p@5"] for q in held["single"]["queries"]},
        }
        print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}))


if __name__ == "__main__":
    main()
