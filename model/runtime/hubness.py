"""Hubness correction of the joint scores (CSLS, Conneau et al. 2018): a photo's penalty
is a weight × the mean of its ``k`` largest scores against a bank of training captions
(a caption's, against training photos); a query ranks by ``score − penalty``."""

from __future__ import annotations

import json
import threading
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from groundsearch.common.files import atomic_path, sha256_file

FILE_NAME = "hubness.npz"
#: The relevance model's ``info`` key naming the hubness file (SHA-256) it was fitted on.
HUBNESS_KEY = "hubness_sha256"
#: Vectors (or ids) whose penalties are computed in one product with the bank.
CHUNK = 512
#: (item ids, weights: rows × d) → their vectors' inner products (items × rows).
Products = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: Penalties ``Penalties`` keeps (then forgets all at once and computes again).
KEPT = 1_000_000


class HubnessError(ValueError):
    """A hubness file that cannot be used (unreadable, inconsistent, another checkpoint)."""


def top_means(scores: np.ndarray, k: int) -> np.ndarray:
    """Each row's mean of its ``k`` largest scores (all of them when fewer)."""
    scores = np.asarray(scores)
    k = max(1, min(k, scores.shape[1]))
    return np.partition(scores, -k, axis=1)[:, -k:].mean(axis=1).astype(np.float64)


def bank_means(x: np.ndarray, bank: np.ndarray, k: int) -> np.ndarray:
    """Each row's mean of its ``k`` largest inner products with the bank's rows."""
    x, bank = np.asarray(x, np.float32), np.asarray(bank, np.float32)
    out = np.empty(len(x), np.float64)
    for start in range(0, len(x), CHUNK):
        out[start : start + CHUNK] = top_means(x[start : start + CHUNK] @ bank.T, k)
    return out


@dataclass(frozen=True, eq=False)
class Penalty:
    """One side's penalty: ``weight`` × a vector's mean top-``k`` score against ``bank``."""

    bank: np.ndarray
    k: int
    weight: float

    def __post_init__(self) -> None:
        if self.bank.ndim != 2 or not len(self.bank):
            raise HubnessError("a hubness bank must be a non-empty matrix of vectors")
        if self.k < 1 or not 0.0 <= self.weight <= 10.0:
            raise HubnessError(
                f"hubness k must be ≥ 1 and weight in 0–10, got {self.k}, {self.weight}"
            )

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        vectors = np.asarray(vectors, np.float32).reshape(-1, self.bank.shape[1])
        if not len(vectors) or self.weight == 0.0:
            return np.zeros(len(vectors))
        return self.weight * bank_means(vectors, self.bank, self.k)

    def of_products(self, products: np.ndarray) -> np.ndarray:
        """The penalties of items from their inner products with the bank (items × bank)."""
        return self.weight * top_means(products, self.k)


class Penalties:
    """``penalties(ids)``: each item's penalty under one side, computed once from its
    vector's products with the bank (``products``: a gallery's photos or captions)."""

    def __init__(self, side: Penalty, products: Products, kept: int = KEPT) -> None:
        self.side, self.products, self.kept = side, products, kept
        #: the known ids, sorted, and their penalties: replaced whole, never changed, so
        #: read without a lock (a query's 1,000 hits looked up at once: 0.15 ms, a dict 0.5)
        self._known = (np.empty(0, np.int64), np.empty(0, np.float64))
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many items' penalties are kept."""
        return int(self._known[0].size)

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, np.int64)
        known, values = self._known
        at = np.searchsorted(known, ids).clip(max=max(known.size - 1, 0))
        found = known[at] == ids if known.size else np.zeros(ids.size, bool)
        out = values[at] if known.size else np.zeros(ids.size)
        if found.all():
            return out
        missing = np.array(list(dict.fromkeys(ids[~found].tolist())), np.int64)  # first seen
        fresh = np.concatenate(
            [
                self.side.of_products(self.products(missing[start : start + CHUNK], self.side.bank))
                for start in range(0, missing.size, CHUNK)
            ],
            dtype=np.float64,
        )
        order = np.argsort(missing)
        out[~found] = fresh[order[np.searchsorted(missing, ids[~found], sorter=order)]]
        with self._lock:
            known, values = self._known
            if known.size + missing.size > self.kept:  # forget all at once, keep these
                known, values = known[:0], values[:0]
            merged, first = np.unique(np.concatenate([known, missing]), return_index=True)
            self._known = (merged, np.concatenate([values, fresh])[first])
        return out

    def corrected(self, ids: np.ndarray, scores: Sequence[float] | np.ndarray) -> np.ndarray:
        """Each item's score − its penalty, in the same order."""
        return np.asarray(scores, np.float64) - self(np.asarray(ids, np.int64))

    def ranked(self, ids: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hits re-ranked by score − penalty (``corrected_order``)."""
        return corrected_order(ids, scores, self(ids))


@dataclass(frozen=True, eq=False)
class Hubness:
    """The photos' penalty (text → photo), the captions' (photo → caption; None: not
    corrected) and the checkpoint they were chosen for (``identity``)."""

    photos: Penalty
    captions: Penalty | None
    identity: Mapping[str, str]
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        return int(self.photos.bank.shape[1])

    def photo_penalties(self, photos: np.ndarray) -> np.ndarray:
        """Each photo vector's penalty, taken off its score for a text query."""
        return self.photos(photos)

    def caption_penalties(self, captions: np.ndarray) -> np.ndarray:
        """Each caption vector's penalty, taken off its score for a photo (zeros when the
        file corrects text → photo scores alone)."""
        if self.captions is None:
            return np.zeros(len(np.asarray(captions).reshape(-1, self.dim)))
        return self.captions(captions)

    def save(self, path: Path) -> None:
        """Write it as ``.npz`` (the banks in float16), atomically."""
        meta: dict[str, Any] = {"k": self.photos.k, "weight": self.photos.weight}
        meta.update(identity=dict(self.identity), **self.info)
        photos = np.zeros((0, self.dim), np.float16)  # none: text → photo scores alone
        if self.captions is not None:
            meta.update(caption_k=self.captions.k, caption_weight=self.captions.weight)
            photos = self.captions.bank.astype(np.float16)
        captions = self.photos.bank.astype(np.float16)
        with atomic_path(Path(path)) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, meta=np.asarray(json.dumps(meta)), captions=captions, photos=photos)


def load_hubness(path: Path, identity: Mapping[str, str] | None = None) -> Hubness:
    """The correction in ``path``; HubnessError if unreadable or for another ``identity``."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            captions = np.asarray(data["captions"], np.float32)
            photos = np.asarray(data["photos"], np.float32) if "photos" in data else None
            photos = photos if photos is not None and len(photos) else None
            meta = json.loads(str(data["meta"]))
        photo_side = Penalty(captions, int(meta.pop("k")), float(meta.pop("weight")))
        caption_side = None
        if photos is not None:
            k, weight = int(meta.pop("caption_k")), float(meta.pop("caption_weight"))
            caption_side = Penalty(photos, k, weight)
            if photos.shape[1] != captions.shape[1]:
                raise HubnessError(f"{path}: its two banks have different dimensions")
        hub = Hubness(photo_side, caption_side, dict(meta.pop("identity")), meta)
    except HubnessError:
        raise
    except (OSError, EOFError, zipfile.BadZipFile, ValueError, KeyError, TypeError) as exc:
        raise HubnessError(f"cannot read hubness file {path}: {exc}") from None
    if identity is not None and dict(hub.identity) != dict(identity):
        raise HubnessError(f"{path} was chosen for another checkpoint")
    return hub


def file_digest(path: Path | None) -> str | None:
    """The SHA-256 of a hubness file (what a relevance model fitted with it records)."""
    return None if path is None else sha256_file(Path(path))


def corrected_order(
    ids: np.ndarray, scores: np.ndarray, penalties: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Hits re-ranked by ``score − penalty``, best first (ties keep their order)."""
    fixed = np.asarray(scores, np.float64) - np.asarray(penalties, np.float64)
    order = np.argsort(-fixed, kind="stable")
    return np.asarray(ids)[order], fixed[order]
