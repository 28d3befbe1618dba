"""Tiny Flickr8k-layout folders built from the real data (photos linked, not copied)."""

from __future__ import annotations

import functools
from pathlib import Path

from groundsearch.common.settings import get_settings

DATA = get_settings().data_dir
FLICKR = DATA / "flickr8k"


def make_tiny_flickr(
    root: Path, train: int = 12, dev: int = 4, test: int = 4, expert: bool = False
) -> Path:
    """The first photos of each official split with their captions; with ``expert``, the
    expert judgments of the test photos (and the captions they name) too."""
    (root / "Images").mkdir(parents=True)
    names: set[str] = set()
    for split, n in (("train", train), ("dev", dev), ("test", test)):
        src = f"Flickr_8k.{split}Images.txt"
        chosen = (FLICKR / src).read_text().split()[:n]
        (root / src).write_text("\n".join(chosen) + "\n")
        names.update(chosen)
    for name in names:
        (root / "Images" / name).symlink_to(FLICKR / "Images" / name)
    lines = (FLICKR / "Flickr8k.token.txt").read_text().splitlines()
    caption_ids: set[str] = set()
    if expert:
        test_names = set((root / "Flickr_8k.testImages.txt").read_text().split())
        judged = [
            ln
            for ln in (FLICKR / "ExpertAnnotations.txt").read_text().splitlines()
            if ln.split("\t", 1)[0] in test_names
        ]
        (root / "ExpertAnnotations.txt").write_text("\n".join(judged) + "\n")
        caption_ids = {ln.split("\t")[1] for ln in judged}
    kept = [
        ln for ln in lines if ln.split("#", 1)[0] in names or ln.split("\t", 1)[0] in caption_ids
    ]
    (root / "Flickr8k.token.txt").write_text("\n".join(kept) + "\n")
    return root


CC_WEB = DATA / "cc-web"


def make_tiny_features(root: Path, train: int = 16, dev: int = 6) -> Path:
    """The first cc-web photos of its train and dev lists as a features collection: their
    captions, split lists and CNN feature rows (real data, a few KB)."""
    import numpy as np

    (root / "features").mkdir(parents=True)
    lines = (CC_WEB / "captions.tsv").read_text(encoding="utf-8").splitlines()
    row = {ln.split("#", 1)[0]: i for i, ln in enumerate(lines)}
    chosen: list[str] = []
    for split, n in (("train", train), ("dev", dev)):
        names = (CC_WEB / f"{split}.txt").read_text().split()[:n]
        (root / f"{split}.txt").write_text("\n".join(names) + "\n")
        chosen += names
    (root / "captions.tsv").write_text("\n".join(lines[row[n]] for n in chosen) + "\n")
    for src in sorted((CC_WEB / "features").glob("*.npy")):
        rows = np.load(src, mmap_mode="r")[[row[n] for n in chosen]]
        np.save(root / "features" / src.name, np.asarray(rows))
    return root


@functools.cache
def shipped_width() -> int:
    """The width of the shipped SDT-RNN's photo vectors (its joint space's, then its concept
    channel's columns)."""
    import numpy as np

    from groundsearch.model.runtime.checkpoints import load_checkpoint

    model = load_checkpoint(get_settings().default_checkpoint)
    return int(model.embed_images(np.zeros((1, 1280), np.float32)).shape[1])
