"""A stand-in for a user's own captioned collection, for the fine-tuning worked example.

    python bench/user_collection.py runs/user-web

Writes a features collection (``model.data.sources``: captions.tsv, train/dev/test.txt,
features/<backbone>.npy) of the 1,000 cc-web **dev** photos — web photos the shipped model
never trained on — split by the hash rule of a user's captions file
(``sources.hash_split``: one in ten dev, one in ten test). Its photos' pixels are not on
this machine (cc-web ships their features), so it is a features collection; a user's own
photos are a captions file beside them (``--source ~/shop/captions.tsv``) and go through
the very same ``train --init``. Nothing here is committed: it is derived data.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from groundsearch.common.settings import get_settings
from groundsearch.model.data.sources import hash_split, load_source, parse_source


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="the folder to write")
    args = ap.parse_args(argv)
    ds = load_source(parse_source("cc-web", get_settings().data_dir), "dev")
    assert ds.features is not None
    out: Path = args.out
    (out / "features").mkdir(parents=True, exist_ok=True)
    lines = [f"{name}#0\t{text}" for name, text in zip(ds.images, ds.captions, strict=True)]
    (out / "captions.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for split in ("train", "dev", "test"):
        names = [n for n in ds.images if hash_split(n) == split]
        (out / f"{split}.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
        print(f"{split}: {len(names)} photos")
    np.save(out / "features" / f"{ds.backbone}.npy", ds.features.astype(np.float16))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
