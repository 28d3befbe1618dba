"""Examples for docs/RESULTS.md: photos whose written sentence changes when it must name
the classifier's confident word — the photo, the old sentence, the new one and what the
classifier saw — from a Flickr8k split and from scikit-image's sample photos.

    python bench/novel_examples.py [--split test] [--decoder runs/captions/heldout.pt] [--n 8]
        [--samples] [--figure docs/img/novel-heldout.jpg]

With --figure it also writes one JPEG: a row per example with the photo, the old sentence,
the new one and the classifier's top words with their probabilities.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont, ImageOps

from groundsearch.cli.common import make_parser
from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.captioning import load_decoder
from groundsearch.model.runtime.captioning.novel import NovelWords
from groundsearch.model.runtime.checkpoints import load_checkpoint
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.tagger import WordTagger

THUMB, TEXT_WIDTH, GAP = 160, 300, 8
WHITE, BLACK, GREY, GREEN = (255, 255, 255), (0, 0, 0), (90, 90, 90), (0, 110, 0)


def _thumb(path: Path, size: int) -> Image.Image:
    with Image.open(path) as im:
        thumb = ImageOps.exif_transpose(im).convert("RGB")
    thumb.thumbnail((size, size), Image.Resampling.BICUBIC)
    return thumb


def figure(rows: list[tuple[Path, str, str, list[str]]]) -> Image.Image:
    """The grid: per row (photo, old sentence, new sentence, classifier's words)."""
    font = ImageFont.load_default(size=15)
    bold = ImageFont.load_default(size=16)
    small = ImageFont.load_default(size=11)
    heads = ["photo", "old sentence", "new sentence", "the classifier saw"]
    xs = [GAP, GAP + THUMB + GAP]
    xs += [xs[1] + TEXT_WIDTH + GAP, xs[1] + 2 * (TEXT_WIDTH + GAP)]
    width, head = xs[3] + TEXT_WIDTH + GAP, 30
    canvas = Image.new("RGB", (width, head + len(rows) * (THUMB + GAP) + GAP), WHITE)
    draw = ImageDraw.Draw(canvas)
    for x, text in zip(xs, heads, strict=True):
        draw.text((x, 6), text, fill=BLACK, font=bold)
    for r, (path, old, new, saw) in enumerate(rows):
        y = head + r * (THUMB + GAP)
        draw.line([(0, y - GAP // 2), (width, y - GAP // 2)], fill=(210, 210, 210))
        thumb = _thumb(path, THUMB)
        canvas.paste(thumb, (xs[0] + (THUMB - thumb.width) // 2, y + (THUMB - thumb.height) // 2))
        draw.text(
            (xs[0] + 2, y + THUMB - 14),
            path.stem[:22],
            fill=WHITE,
            font=small,
            stroke_width=2,
            stroke_fill=BLACK,
        )
        cells = [
            ("\n".join(textwrap.wrap(old, 30)), GREY),
            ("\n".join(textwrap.wrap(new, 30)), GREEN),
        ]
        cells.append(("\n".join(saw), BLACK))
        for x, (text, colour) in zip(xs[1:], cells, strict=True):
            draw.multiline_text((x, y + 4), text, fill=colour, font=font, spacing=5)
    return canvas


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="test")
    ap.add_argument("--decoder", type=Path)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--samples", action="store_true", help="scikit-image's sample photos")
    ap.add_argument("--figure", type=Path, help="also write the examples as one JPEG grid")
    ap.add_argument("--no-tagger", action="store_true", help="the classifier's words only")
    args = ap.parse_args()
    if args.figure is not None and args.figure.suffix.lower() not in (".jpg", ".jpeg"):
        raise SystemExit(f"--figure must name a .jpg file, not {args.figure}")
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
    tagger = None if args.no_tagger else WordTagger.load(backbone=model.backbone)
    novel = NovelWords.for_decoder(decoder, model.backbone, tagger=tagger)
    tagged = novel.tag_probabilities(features)
    column = {w: j for j, w in enumerate(novel.words)}
    chosen = novel.confident(features)
    old = decoder.generate(vectors)
    new = decoder.generate(vectors, constraints=novel.constraints(features))
    seen = novel.seen(features, top=2)
    print("| photo | old sentence | new sentence | the classifier saw |")
    print("|---|---|---|---|")
    shown = 0
    rows: list[tuple[Path, str, str, list[str]]] = []
    for row, (path, a, b, saw) in enumerate(zip(paths, old, new, seen, strict=True)):
        if a[0].text == b[0].text or shown >= args.n:
            continue
        tags = [
            f"{w} (tagger, {tagged[row, column[w]]:.2f})"
            for w in chosen[row]
            if w in novel.tagged
            and not novel.speaks_for(w, 0.0)
            and tagged[row, column[w]] >= novel.tagger_threshold
        ]
        what = ", ".join(
            [f"{c.word or '(never named)'} ({c.imagenet_class}, {c.probability:.2f})" for c in saw]
            + tags
        )
        print(f"| {path.name} | {a[0].text} | {b[0].text} | {what} |")
        words = [
            f"{c.word or '(never named)'} {c.probability:.2f}"
            + ("" if c.word == c.imagenet_class else f"\n  (class: {c.imagenet_class[:24]})")
            for c in saw
        ] + tags
        rows.append((path, a[0].text, b[0].text, words))
        shown += 1
    if args.figure is not None:
        if not rows:
            raise SystemExit("no photo's sentence changed: nothing to draw")
        args.figure.parent.mkdir(parents=True, exist_ok=True)
        figure(rows).save(args.figure, "JPEG", quality=85, optimize=True)
        print(f"wrote {args.figure} ({args.figure.stat().st_size // 1024} kB)", file=sys.stderr)


if __name__ == "__main__":
    main()
