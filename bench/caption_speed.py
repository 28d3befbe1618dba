"""Caption generation latency per photo: beam 1, 3 and 5, with and without re-ranking,
beside one photo's CNN pass through the shipped model's backbone, measured in the same
run on the same machine.

    python bench/caption_speed.py --gallery runs/scale/flickr8k-all        # make bench-captions
    python bench/caption_speed.py --gallery DIR --photos 50 --threads 1

Each photo is captioned alone (one row: the service's case), from its joint vector in
the gallery (the CNN is not part of the generation figures). Re-ranking parses and
embeds the beam's sentences with the shipped SDT-RNN (parse cache off). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np
import torch

from groundsearch.common.settings import get_settings
from groundsearch.index.store.export import export_vectors
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.captioning import load_decoder, rerank
from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.images.photos import decode_photo
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.sentences import Sentences

sys.path.insert(0, str(Path(__file__).parent))
from common import latency, timings_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gallery", type=Path, required=True, help="gallery with the test photos")
    ap.add_argument("--decoder", type=Path, help="default: the shipped decoder")
    ap.add_argument("--photos", type=int, default=100, help="test photos captioned one by one")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    s = get_settings()
    identity = checkpoint_identity(s.default_checkpoint)
    decoder = load_decoder(args.decoder or s.default_decoder, identity=identity)
    ds = load_captioned_images(s.flickr8k_dir, split="test")
    names = list(ds.images[: args.photos])
    vectors = export_vectors(args.gallery, identity).subset(names).photo_vectors
    parser = Parser(s.parser_dir, s.cache_dir, use_cache=False)
    model = load_checkpoint(s.default_checkpoint, parser=parser.version)

    door = Sentences(None, parser.parse)

    def embed(texts: list[str]) -> np.ndarray:
        return model.embed_sentences(door.trees(texts))

    embed(["A dog runs on the beach."])  # load the parser before timing
    results: dict[str, object] = {}
    for beam in (1, 3, 5):
        for reranked in (False, True):
            samples = []
            for v in vectors:
                row = v[None]

                def run(row: np.ndarray = row, beam: int = beam, reranked: bool = reranked) -> None:
                    beams = decoder.generate(row, beam=beam)
                    if reranked:
                        rerank(row, beams, embed)

                samples += timings_ms(run, 1)
            results[f"beam {beam}{' + rerank' if reranked else ''}"] = latency(samples)

    extractor = FeatureExtractor.for_identity(model.backbone)
    photos = [decode_photo(ds.image_path(i))[0] for i in range(min(20, len(names)))]
    cnn = [t for p in photos for t in timings_ms(lambda p=p: extractor.embed_images([p]), 1)]
    results[f"reference: one photo's CNN pass ({model.backbone})"] = latency(cnn)
    print(
        json.dumps(
            {
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "torch_threads": args.threads,
                "photos": len(names),
                "decoder": str(args.decoder or s.default_decoder),
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
