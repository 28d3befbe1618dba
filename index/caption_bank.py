"""Captions ``/describe`` may answer with besides the gallery's: the data folder's
training captions (else the sample's) or a captions file, their vectors cached under the
checkpoint's and the texts' digests."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from groundsearch.common.files import atomic_path
from groundsearch.index.search.vectors import VectorIndex
from groundsearch.model.data import load_captioned_images
from groundsearch.model.data.caption_files import read_caption_file
from groundsearch.model.data.flickr import FLICKR8K_SPLITS
from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.hubness import Penalty
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.sentences import Sentences

BANK_DIR = "caption-banks"
SPLIT_FILES = {"flickr8k": FLICKR8K_SPLITS, "cc-web": {"train": "train.txt", "dev": "dev.txt"}}


#: The data folder's collections the default bank draws from: folder → its captions file.
TRAINING_COLLECTIONS = {"flickr8k": "Flickr8k.token.txt", "cc-web": "captions.tsv"}


def training_captions(data_dir: Path | None, sample_captions: Path) -> tuple[list[str], str]:
    """The train + dev captions of each collection of ``data_dir`` there, else the sample's."""
    texts: list[str] = []
    names: list[str] = []
    for folder, captions_file in TRAINING_COLLECTIONS.items():
        root = Path(data_dir or "") / folder
        if data_dir is None or not (root / captions_file).is_file():
            continue
        for split in ("train", "dev"):
            ds = load_captioned_images(
                root, split=root / SPLIT_FILES[folder][split], captions_file=captions_file,
                files=folder == "flickr8k",
            )  # fmt: skip
            texts += ds.captions
        names.append(folder)
    if texts:
        return texts, " + ".join(f"{n} train+dev" for n in names)
    return captions_from(sample_captions)[0], "sample captions"


def captions_from(path: Path) -> tuple[list[str], str]:
    """Every caption of a TSV or JSONL captions file (CaptionFileError if unusable)."""
    found = read_caption_file(Path(path)).captions
    return sorted({t for texts in found.values() for t in texts}), Path(path).name


class CaptionBank:
    """Caption texts and their vectors, searched exactly by inner product, less each
    caption's hubness ``penalty`` if given (an extra column: −penalty, the query's 1)."""

    def __init__(
        self, name: str, texts: Sequence[str], vectors: np.ndarray, penalty: Penalty | None = None
    ) -> None:
        self.name, self.texts = name, list(texts)
        self.corrected = penalty is not None and bool(self.texts)
        if penalty is not None and self.texts:
            column = -penalty(vectors).astype(np.float32).reshape(-1, 1)
            vectors = np.hstack([np.asarray(vectors, np.float32), column])
        self.index = VectorIndex(int(vectors.shape[1]) if vectors.size else 1)
        if self.texts:
            self.index.add(range(1, len(self.texts) + 1), vectors)

    def __len__(self) -> int:
        return len(self.texts)

    def search(self, query: np.ndarray, k: int) -> list[tuple[str, float]]:
        if not self.texts:
            return []
        if self.corrected:
            query = np.append(np.asarray(query, np.float32).reshape(-1), np.float32(1.0))
        hits = self.index.search(query, k)[0]
        return [(self.texts[i - 1], score) for i, score in hits]

    @classmethod
    def load_or_build(
        cls,
        name: str,
        texts: Sequence[str],
        model: Embedder,
        parser: Parser,
        identity: dict[str, str],
        cache_dir: Path,
        workers: int = 1,
        penalty: Penalty | None = None,
    ) -> CaptionBank:
        """The bank from its cache file, or embedded now and cached (unusable texts left out)."""
        texts = sorted(set(texts))
        digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12]
        path = cache_dir / BANK_DIR / f"{identity['checkpoint_sha256'][:12]}-{digest}.npz"
        try:
            with np.load(path) as saved:
                return cls(name, [str(t) for t in saved["texts"]], saved["vectors"], penalty)
        except (OSError, KeyError, ValueError):
            pass
        door = Sentences(model, lambda cleaned: parser.parse(cleaned, workers=workers))
        kept, vectors, _ = door.usable_vectors(texts)  # kept: each text as cleaned
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, texts=np.asarray(kept, dtype=str), vectors=vectors)
        return cls(name, kept, vectors, penalty)
