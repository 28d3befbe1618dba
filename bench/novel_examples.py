"""Examples for docs/RESULTS.md: photos whose written sentence changes when it must name
the classifier's confident word — the photo, the old sentence, the new one and what the
classifier saw — from a Flickr8k split and from scikit-image's sample photos.

    python bench/novel_examples.py [--split test] [--decoder runs/captions/heldout.pt] [--n 8]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from groundsearch.cli.common import make_parser
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.captioning import load_decoder
from groundsearch.model.runtime.captioning.novel import NovelWords
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.settings import get_settings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="test")
    ap.add_argument("--decoder", type=Path)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--samples", action="store_true", help="scikit-image's sample photos")
    args = ap.parse_args()
    s = get_settings()
    model = load_checkpoint(s.default_checkpoint, parser=make_parser().version)
    decoder = load_decoder(args.decoder or s.default_decoder)
    extractor = FeatureExtractor(model.backbone, cache_dir=s.cache_dir)
    if args.samples:
        import skimage

        folder = Path(skimage.__file__).parent / "data"
        paths = sorted(p for p in folder.iterdir() if p.suffix in (".png", ".jpg"))
    else:
        ds = load_captioned_images(s.flickr8k_dir, split=args.split)
        paths = [ds.image_path(i) for i in range(len(ds.images))]
    features = extractor.embed_files(paths)
    vectors = model.embed_images(features)
    novel = NovelWords.for_decoder(decoder, model.backbone)
    old = decoder.generate(vectors)
    new = decoder.generate(vectors, constraints=novel.constraints(features))
    seen = novel.seen(features, top=2)
    print("| photo | old sentence | new sentence | the classifier saw |")
    print("|---|---|---|---|")
    shown = 0
    for path, a, b, saw in zip(paths, old, new, seen, strict=True):
        if a[0].text == b[0].text or shown >= args.n:
            continue
        what = ", ".join(
            f"{c.word or '(never named)'} ({c.imagenet_class}, {c.probability:.2f})" for c in saw
        )
        print(f"| {path.name} | {a[0].text} | {b[0].text} | {what} |")
        shown += 1


if __name__ == "__main__":
    main()
