"""What the concept channel adds: checkpoint load, one text, one photo — each beside
one stanza parse and one CNN pass measured in the same run (medians, one thread).

    python bench/concept_overhead.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch
from PIL import Image

from groundsearch.cli.common import make_parser
from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.sentences import Sentences

sys.path.insert(0, str(Path(__file__).parent))
from common import median_ms


def main() -> None:
    import skimage.data

    torch.set_num_threads(1)
    parser = make_parser(use_cache=False)
    path = get_settings().default_checkpoint
    t = time.perf_counter()
    on = load_checkpoint(path, parser=parser.version)
    load_on = time.perf_counter() - t
    t = time.perf_counter()
    off = load_checkpoint(path, parser=parser.version, concept_weight=0)
    load_off = time.perf_counter() - t
    extractor = FeatureExtractor(on.backbone)
    photo = Image.fromarray(skimage.data.chelsea())
    text = "a brown dog runs through the snow ."
    trees = Sentences(None, parser.parse).trees([text])
    feats = extractor.embed_images([photo])
    print(
        json.dumps(
            {
                "load_s": {"with": round(load_on, 2), "without": round(load_off, 2)},
                "parse_ms (reference)": median_ms(lambda: parser.parse([text]), 10, warm=False),
                "cnn_ms (reference)": median_ms(
                    lambda: extractor.embed_images([photo]), 10, warm=False
                ),
                "text_ms": {
                    "with": median_ms(lambda: on.embed_sentences(trees), warm=False),
                    "without": median_ms(lambda: off.embed_sentences(trees), warm=False),
                },
                "photo_ms": {
                    "with": median_ms(lambda: on.embed_images(feats), warm=False),
                    "without": median_ms(lambda: off.embed_images(feats), warm=False),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
