"""Hubness correction of text → photo scores (CSLS, Conneau et al. 2018).

A few photos of a joint space lie near every sentence ("hubs") and come first for queries
they do not fit. A photo's **penalty** is ``weight`` × the mean of its ``k`` largest scores
against a bank of training captions; a text query ranks photos by ``score − penalty``
(the query's own CSLS term is the same for every photo, so it is left out). The bank,
``k`` and ``weight`` are chosen on the mixed dev by ``groundsearch fit-hubness``
(``model.training.hubness``) and saved beside the relevance model (``FILE_NAME``), bound
to the checkpoint's identity like it. docs/RESULTS.md, "Hubness correction".
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from groundsearch.common.files import atomic_path, sha256_file

FILE_NAME = "hubness.npz"
#: The relevance model's ``info`` key naming the hubness file (SHA-256) it was fitted on.
HUBNESS_KEY = "hubness_sha256"
#: Photos whose penalties are computed in one product with the bank.
CHUNK = 512


class HubnessError(ValueError):
    """A hubness file that cannot be used (unreadable, inconsistent, another checkpoint)."""


def bank_means(x: np.ndarray, bank: np.ndarray, k: int) -> np.ndarray:
    """Each row's mean of its ``k`` largest inner products with the bank's rows."""
    x = np.asarray(x, np.float32)
    bank = np.asarray(bank, np.float32)
    k = max(1, min(k, len(bank)))
    out = np.empty(len(x), np.float64)
    for start in range(0, len(x), CHUNK):
        s = x[start : start + CHUNK] @ bank.T
        out[start : start + CHUNK] = np.partition(s, -k, axis=1)[:, -k:].mean(axis=1)
    return out


@dataclass(frozen=True, eq=False)
class Hubness:
    """The bank of caption vectors (rows), ``k``, the penalty's ``weight`` and the
    checkpoint they were chosen for (``identity``)."""

    captions: np.ndarray
    k: int
    weight: float
    identity: Mapping[str, str]
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.captions.ndim != 2 or not len(self.captions):
            raise HubnessError("the hubness bank must be a non-empty matrix of caption vectors")
        if self.k < 1 or not 0.0 <= self.weight <= 10.0:
            raise HubnessError(
                f"hubness k must be ≥ 1 and weight in 0–10, got {self.k}, {self.weight}"
            )

    @property
    def dim(self) -> int:
        return int(self.captions.shape[1])

    def penalties(self, photos: np.ndarray) -> np.ndarray:
        """Each photo vector's penalty (``weight`` × its mean top-``k`` bank score)."""
        photos = np.asarray(photos, np.float32).reshape(-1, self.dim)
        if not len(photos) or self.weight == 0.0:
            return np.zeros(len(photos))
        return self.weight * bank_means(photos, self.captions, self.k)

    def save(self, path: Path) -> None:
        """Write it as ``.npz`` (the bank in float16), atomically."""
        meta = {"k": self.k, "weight": self.weight, "identity": dict(self.identity), **self.info}
        with atomic_path(Path(path)) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, captions=self.captions.astype(np.float16), meta=json.dumps(meta))


def load_hubness(path: Path, identity: Mapping[str, str] | None = None) -> Hubness:
    """The hubness correction in ``path``; HubnessError if unreadable or for another
    ``identity``."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            captions = np.asarray(data["captions"], np.float32)
            meta = json.loads(str(data["meta"]))
        hub = Hubness(
            captions,
            int(meta.pop("k")),
            float(meta.pop("weight")),
            dict(meta.pop("identity")),
            meta,
        )
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
