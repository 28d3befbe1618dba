"""``fit-hubness``: the hubness correction of the joint scores, chosen on the dev splits."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from groundsearch.cli.common import (
    checkpoint_argument,
    checkpoint_path,
    command,
    data_option,
    json_text,
    loaded_model,
    positive_int,
    sources_of,
    user_errors,
)
from groundsearch.cli.concepts import hold_out_option
from groundsearch.common.settings import get_settings

COMMANDS = ("fit-hubness",)


def cmd_fit_hubness(args: argparse.Namespace) -> int:
    import numpy as np

    from groundsearch.model.data import DatasetError
    from groundsearch.model.data.held_out_concepts import resolve, without_concepts
    from groundsearch.model.data.sources import load_source
    from groundsearch.model.runtime.checkpoints import CheckpointError, checkpoint_identity
    from groundsearch.model.runtime.hubness import FILE_NAME, Hubness, Penalty
    from groundsearch.model.runtime.sentences import UnusableText
    from groundsearch.model.training.corpus import photo_features
    from groundsearch.model.training.hubness import DevSplit, bank_rows, choose

    s = get_settings()
    out = Path(args.out) if args.out else s.model_dir / FILE_NAME
    with user_errors(DatasetError, CheckpointError, UnusableText):
        path = checkpoint_path(args)
        model, extractor, parse = loaded_model(args)
        sources = sources_of(args)
        train = [load_source(src, "train", extractor.identity) for src in sources]
        if args.hold_out:  # the banks of a model trained without these concepts' photos
            train = [without_concepts(ds, resolve(args.hold_out)) for ds in train]
        rows = bank_rows([len(ds.captions) for ds in train], args.bank)
        texts = [ds.captions[i] for ds, take in zip(train, rows, strict=True) for i in take]
        captions = model.embed_sentences(parse(texts))
        rows = bank_rows([len(ds.images) for ds in train], args.bank)
        photos = np.concatenate(
            [
                model.embed_images(photo_features(ds.subset(take.tolist()), extractor, True))
                for ds, take in zip(train, rows, strict=True)
            ]
        )

        def dev(src: Any) -> DevSplit:
            ds = load_source(src, "dev", extractor.identity)
            v = model.embed_images(photo_features(ds, extractor, progress=True))
            y = model.embed_sentences(parse(list(ds.captions)))
            return DevSplit(src.name, v, y, np.asarray(ds.caption_image))

        devs = [dev(src) for src in sources]
        chosen = {"photos": choose(devs, captions), "captions": choose(devs, photos, "captions")}
        info: dict[str, Any] = {
            "command": "groundsearch fit-hubness",
            "checkpoint": path.name,
            "sources": [src.name for src in sources],
            "banks": f"{len(captions)} train captions and {len(photos)} train photos, in "
            "proportion to each collection's",
            "rule": "each side's k and weight: the best mean over the dev collections of its "
            "direction's R@1 + R@5 + R@10 (photos: image search; captions: description)",
        }
        sides = {
            name: Penalty(bank, chosen[name]["k"], chosen[name]["weight"])
            for name, bank in (("photos", captions), ("captions", photos))
        }
        Hubness(sides["photos"], sides["captions"], checkpoint_identity(path), info).save(out)

    def figures(row: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in row.items() if k not in ("k", "weight")}

    summary: dict[str, Any] = {"out": str(out), "banks": info["banks"]}
    for name, direction in (("photos", "image_search"), ("captions", "description")):
        summary[f"{name}_penalty"] = {"k": chosen[name]["k"], "weight": chosen[name]["weight"]}
        summary[f"dev_{direction}_raw"] = figures(chosen[name]["raw"])
        summary[f"dev_{direction}_corrected"] = figures(chosen[name]["best"])
    print(json_text(summary))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(
        sub,
        "fit-hubness",
        cmd_fit_hubness,
        "choose the hubness correction of text -> photo and photo -> caption scores (banks "
        "of training captions and photos, each side's k and weight) on the dev splits of "
        "--source and save it",
    )
    checkpoint_argument(p, "the joint-model checkpoint whose scores are corrected")
    data_option(p, many=True, default="flickr8k,cc-web")
    p.add_argument(
        "--bank",
        type=positive_int,
        default=10_000,
        help="training captions in the photos' bank, and photos in the captions'",
    )
    hold_out_option(
        p,
        "draw the banks without the training photos of these concepts (comma-separated, "
        "or 'default'), as `train --hold-out` trained the checkpoint",
    )
    p.add_argument("--out", help="where to write it (default: the artifacts' hubness.npz)")
