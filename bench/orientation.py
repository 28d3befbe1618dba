"""What applying the EXIF orientation changes (issue 25, item 0), measured with the shipped
checkpoint (EfficientNet-Lite2 features → the joint space) on real Flickr8k test photos.

    python bench/orientation.py [--photos 50] [--retrieval 1000] [--sentences 100]
                                [--parts tags cost check retrieval]

1. **The 8-orientation check.** Each of the first ``--photos`` test photos is stored with
   each of the 8 EXIF orientations (the pixels turned by the inverse, so every file shows
   the same upright picture; PNG, lossless, and JPEG at quality 95) and read by
   ``decode_photo`` as ``groundsearch index`` reads it (``min_side`` of the backbone),
   with the fix and without it (``decode_photo`` with its ``upright`` step made a no-op:
   the code before the fix). Per orientation: the largest |Δ| of the joint-space vector
   from orientation 1's, and the cosine (mean, min).
2. **What a sideways photo loses.** The ``--retrieval`` test photos stored with
   orientation 6 (the usual phone portrait) and read without the fix, against all their
   test captions: image → caption and caption → image R@K beside the upright photos';
   and for ``--sentences`` photos, how often the shipped decoder's sentence changes.
3. **Flickr8k's tags.** How many of the 8,091 photos carry an EXIF block or an
   orientation other than 1 (the dataset's figures change only if some do).
4. **The cost.** ``decode_photo`` of a 12-megapixel JPEG (a real photo, upscaled to a
   phone's 4032×3024) and of a Flickr8k photo, stored upright and with orientation 6, as
   the indexer reads them (``min_side``) and at full size; the served copy's re-encode
   (``upright_copy``); beside one photo's CNN pass, in the same run (medians, one thread).

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import torch
from PIL import Image

from groundsearch.common.settings import get_settings
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.captioning import load_decoder
from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.images import photos
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.images.photos import (
    ORIENTATION,
    decode_photo,
    upright_copy,
)
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.training.corpus import corpus_door, named_trees
from groundsearch.model.training.evaluation.retrieval import retrieval_metrics

sys.path.insert(0, str(Path(__file__).parent))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests.oriented
from common import median_ms
from tests.oriented import STORED_TURN, as_stored


def store(upright: Image.Image, orientation: int, path: Path, fmt: str) -> Path:
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    options = {"quality": 95} if fmt == "JPEG" else {}
    as_stored(upright, orientation).save(path, format=fmt, exif=exif, **options)
    return path


def before_the_fix():
    """``decode_photo`` as it was: the EXIF orientation ignored."""
    return mock.patch.object(photos, "upright", lambda img: img)


def vectors_of(paths: list[Path], extractor: FeatureExtractor, model) -> np.ndarray:
    side = extractor.spec.resize
    images = [decode_photo(p, min_side=side)[0] for p in paths]
    return model.embed_images(extractor.embed_images(images))


def orientation_check(names, images: Path, extractor, model, work: Path) -> dict:
    out: dict[str, dict] = {}
    for fmt, suffix in (("PNG", "png"), ("JPEG", "jpg")):
        files = {o: [] for o in STORED_TURN}
        for name in names:
            with Image.open(images / name) as img:
                upright = img.convert("RGB")
            for o in STORED_TURN:
                files[o].append(store(upright, o, work / f"{Path(name).stem}-o{o}.{suffix}", fmt))
        for fixed in (True, False):
            if fixed:
                vecs = {o: vectors_of(files[o], extractor, model) for o in STORED_TURN}
            else:
                with before_the_fix():
                    vecs = {o: vectors_of(files[o], extractor, model) for o in STORED_TURN}
            rows = {}
            for o in list(STORED_TURN)[1:]:
                cos = np.sum(vecs[o] * vecs[1], axis=1) / (
                    np.linalg.norm(vecs[o], axis=1) * np.linalg.norm(vecs[1], axis=1)
                )
                rows[str(o)] = {
                    "max_abs_diff": float(np.abs(vecs[o] - vecs[1]).max()),
                    "cos_mean": round(float(cos.mean()), 6),
                    "cos_min": round(float(cos.min()), 6),
                }
            out[f"{fmt} {'with' if fixed else 'without'} the fix"] = rows
    return out


def sideways_retrieval(ds, n: int, n_sentences: int, extractor, model, work: Path) -> dict:
    settings = get_settings()
    keep = np.arange(min(n, len(ds.images)))
    chosen = {int(i) for i in keep}
    captions = [c for c, i in zip(ds.captions, ds.caption_image, strict=True) if i in chosen]
    caption_image = np.asarray([i for i in ds.caption_image if i in chosen])
    parser = Parser(settings.parser_dir, settings.cache_dir)
    y = model.embed_sentences(named_trees(corpus_door(parser, model), captions))
    upright_files, sideways_files = [], []
    for i in keep:
        path = ds.image_path(int(i))
        upright_files.append(path)
        with Image.open(path) as img:
            rgb = img.convert("RGB")
        sideways_files.append(store(rgb, 6, work / f"r{i}-o6.png", "PNG"))
    v_up = vectors_of(upright_files, extractor, model)
    v_fixed = vectors_of(sideways_files, extractor, model)
    with before_the_fix():
        v_side = vectors_of(sideways_files, extractor, model)
    result = {}
    for label, v in (
        ("upright", v_up),
        ("orientation 6, with the fix", v_fixed),
        ("orientation 6, without the fix", v_side),
    ):
        m = retrieval_metrics(v @ y.T, caption_image)
        result[label] = {
            "i2t": {k: round(m["i2t"][k], 1) for k in ("R@1", "R@5", "R@10")},
            "t2i": {k: round(m["t2i"][k], 1) for k in ("R@1", "R@5", "R@10")},
            "rsum": round(m["rsum"], 1),
        }
    top_up = np.argmax(v_up @ y.T, axis=1)
    top_side = np.argmax(v_side @ y.T, axis=1)
    result["top caption changed without the fix"] = f"{int((top_up != top_side).sum())}/{len(keep)}"
    decoder = load_decoder(
        settings.default_decoder, identity=checkpoint_identity(settings.default_checkpoint)
    )
    k = min(n_sentences, len(keep))
    up = [g[0].text for g in decoder.generate(v_up[:k], beam=3)]
    side = [g[0].text for g in decoder.generate(v_side[:k], beam=3)]
    fixed = [g[0].text for g in decoder.generate(v_fixed[:k], beam=3)]
    result["written sentence changed"] = {
        "without the fix": f"{sum(a != b for a, b in zip(up, side, strict=True))}/{k}",
        "with the fix": f"{sum(a != b for a, b in zip(up, fixed, strict=True))}/{k}",
    }
    result["examples"] = [
        {"photo": ds.images[i], "upright": up[i], "sideways (before the fix)": side[i]}
        for i in range(k)
        if up[i] != side[i]
    ][:4]
    return result


def flickr8k_tags(images: Path) -> dict:
    counts = {"photos": 0, "with an EXIF block": 0, "orientation other than 1": 0}
    for path in sorted(images.iterdir()):
        with Image.open(path) as img:
            exif = img.getexif()
        counts["photos"] += 1
        counts["with an EXIF block"] += bool(len(exif))
        counts["orientation other than 1"] += exif.get(ORIENTATION, 1) != 1
    return counts


def costs(first_photo: Path, extractor, work: Path, repeats: int) -> dict:
    import skimage.data

    big = Image.fromarray(skimage.data.coffee()).resize((4032, 3024), Image.Resampling.BICUBIC)
    with Image.open(first_photo) as img:
        small = img.convert("RGB")
    side = extractor.spec.resize
    out: dict[str, object] = {}
    for label, photo in (("12 MP JPEG (4032×3024)", big), ("Flickr8k JPEG (224×224)", small)):
        up = store(photo, 1, work / "cost-o1.jpg", "JPEG")
        turned = store(photo, 6, work / "cost-o6.jpg", "JPEG")
        row = {}
        for name, path in (("upright file", up), ("orientation-6 file", turned)):
            row[f"decode_photo min_side, {name}"] = median_ms(
                lambda p=path: decode_photo(p, min_side=side), repeats
            )
            row[f"decode_photo full size, {name}"] = median_ms(
                lambda p=path: decode_photo(p), max(3, repeats // 2)
            )
        with before_the_fix():
            row["decode_photo min_side, orientation-6 file, without the fix"] = median_ms(
                lambda p=turned: decode_photo(p, min_side=side), repeats
            )
        # the turn alone, on what decode_photo turns (the draft-scaled JPEG, or full size)
        for name, draft in (("min_side", True), ("full size", False)):
            with Image.open(turned) as img:
                if draft:
                    img.draft("RGB", (side, side))
                img.load()
                row[f"the turn alone ({name}, {img.width}×{img.height})"] = median_ms(
                    lambda i=img: photos.upright(i), repeats
                )
        row["served copy (upright_copy), orientation-6 file"] = median_ms(
            lambda p=turned: upright_copy(p), max(3, repeats // 4)
        )
        out[label] = row
    img = decode_photo(work / "cost-o6.jpg", min_side=side)[0]
    out[f"one CNN pass ({extractor.identity}, reference)"] = median_ms(
        lambda: extractor.embed_images([img]), repeats
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--photos", type=int, default=50, help="test photos in the 8-orientation check")
    ap.add_argument(
        "--retrieval", type=int, default=1000, help="test photos in the retrieval check"
    )
    ap.add_argument(
        "--sentences", type=int, default=100, help="photos whose sentences are compared"
    )
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument(
        "--parts",
        nargs="+",
        choices=["tags", "cost", "check", "retrieval"],
        default=["tags", "cost", "check", "retrieval"],
    )
    args = ap.parse_args()

    torch.set_num_threads(1)
    settings = get_settings()
    model = load_checkpoint(settings.default_checkpoint)
    extractor = FeatureExtractor.for_identity(model.backbone)  # no cache: every pass is run
    ds = load_captioned_images(settings.flickr8k_dir, split="test")
    images = settings.flickr8k_dir / "Images"
    result: dict[str, object] = {
        "machine": f"{os.cpu_count()} CPUs, torch {torch.__version__} on 1 thread, "
        f"load average {os.getloadavg()[0]:.2f} at the start",
        "backbone": model.backbone,
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "tags" in args.parts:
            result["flickr8k_tags"] = flickr8k_tags(images)
        if "cost" in args.parts:
            result["cost_ms"] = costs(ds.image_path(0), extractor, work, args.repeats)
        if "check" in args.parts:
            names = list(ds.images[: args.photos])
            result["eight_orientations"] = orientation_check(names, images, extractor, model, work)
        if "retrieval" in args.parts:
            result["sideways"] = sideways_retrieval(
                ds, args.retrieval, args.sentences, extractor, model, work
            )
    result["load average at the end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
