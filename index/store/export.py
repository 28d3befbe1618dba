"""Every photo and caption vector of a gallery, with the photos' file names (what a
caption decoder is trained from), read in one read transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from groundsearch.index.errors import StoreError
from groundsearch.index.store import records
from groundsearch.index.store.records import DB_FILE, Records


@dataclass(frozen=True)
class ExportedVectors:
    """Photos (by file name) and captions with their vectors; ``caption_photo[j]`` is the
    row in ``photo_names`` of caption ``j``'s photo."""

    photo_names: tuple[str, ...]
    photo_vectors: np.ndarray
    caption_texts: tuple[str, ...]
    caption_photo: np.ndarray
    caption_vectors: np.ndarray

    @classmethod
    def joined(cls, parts: Sequence[ExportedVectors]) -> ExportedVectors:
        """Several collections' vectors one after another."""
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [len(p.photo_names) for p in parts[:-1]])
        return cls(
            tuple(n for p in parts for n in p.photo_names),
            np.concatenate([p.photo_vectors for p in parts]),
            tuple(t for p in parts for t in p.caption_texts),
            np.concatenate([p.caption_photo + o for p, o in zip(parts, offsets, strict=True)]),
            np.concatenate([p.caption_vectors for p in parts]),
        )

    def subset(self, names: Sequence[str]) -> ExportedVectors:
        """The photos named (in that order) with their captions; StoreError if any lacks."""
        row = {n: i for i, n in enumerate(self.photo_names)}
        missing = [n for n in names if n not in row]
        if missing:
            raise StoreError(
                f"{len(missing)} of {len(names)} photos are not in the gallery "
                f"(e.g. {', '.join(missing[:3])}); index them with the same checkpoint"
            )
        rows = np.array([row[n] for n in names], dtype=np.int64)
        new_row = np.full(len(self.photo_names), -1, dtype=np.int64)
        new_row[rows] = np.arange(len(rows))
        kept = np.flatnonzero(new_row[self.caption_photo] >= 0)
        return ExportedVectors(
            tuple(names),
            self.photo_vectors[rows],
            tuple(self.caption_texts[j] for j in kept),
            new_row[self.caption_photo[kept]],
            self.caption_vectors[kept],
        )


def export_vectors(folder: Path, identity: Mapping[str, str] | None = None) -> ExportedVectors:
    """Every photo (once per file name) and caption of the gallery in ``folder``;
    IdentityMismatch if another model built it, StoreError if there is none."""
    path = Path(folder) / DB_FILE
    if not path.is_file():
        raise StoreError(f"no gallery at {folder}")
    store = Records.open(path, None if identity is None else dict(identity))
    try:
        dim = int(store.meta["dim"])
        with store.snapshot() as db:
            photo_ids, vectors = records.vectors_after(db, "images", 0, dim)
            caption_ids, caption_vectors = records.vectors_after(db, "captions", 0, dim)
            named = [(Path(p).name, pid) for p, pid in records.named_files(db)]
            captions = records.captions(db, caption_ids)
    finally:
        store.close()
    row_of = {pid: i for i, pid in enumerate(photo_ids)}
    named = [(n, pid) for n, pid in named if pid in row_of]
    photo_rows = np.array([row_of[pid] for _, pid in named], dtype=np.int64)
    by_photo: dict[int, list[int]] = {}
    for name_row, (_, pid) in enumerate(named):
        by_photo.setdefault(pid, []).append(name_row)
    # (caption row, name row): each caption once for every file name of its photo
    pairs = [(j, r) for j, c in enumerate(caption_ids) for r in by_photo.get(captions[c][1], [])]
    return ExportedVectors(
        tuple(n for n, _ in named),
        vectors[photo_rows] if len(photo_rows) else np.zeros((0, dim), np.float32),
        tuple(captions[caption_ids[j]][0] for j, _ in pairs),
        np.array([r for _, r in pairs], dtype=np.int64),
        caption_vectors[np.array([j for j, _ in pairs], dtype=np.int64)],
    )
