"""What the concept channel adds: checkpoint load, one text, one photo — each beside
one stanza parse and one CNN pass measured in the same run (medians, one thread).

    python bench/concept_overhead.py
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable

import torch
from PIL import Image

from groundsearch.cli.common import make_parser
from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.sentences import Sentences


def median_ms(f: Callable[[], object], n: int = 30) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return round(1000 * statistics.median(times), 2)


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
                "parse_ms (reference)": median_ms(lambda: parser.parse([text]), 10),
                "cnn_ms (reference)": median_ms(lambda: extractor.embed_images([photo]), 10),
                "text_ms": {
                    "with": median_ms(lambda: on.embed_sentences(trees)),
                    "without": median_ms(lambda: off.embed_sentences(trees)),
                },
                "photo_ms": {
                    "with": median_ms(lambda: on.embed_images(feats)),
                    "without": median_ms(lambda: off.embed_images(feats)),
                },
            }
        )
    )


if __name__ == "__main__":
    main()
