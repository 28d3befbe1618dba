"""The served hubness correction (``model.runtime.hubness``): ``/search`` ranks a text
query's photos by score − the photo's penalty, ``/describe`` a photo's captions by
score − the caption's.

The file is ``hubness.npz`` beside the relevance file (``make refit`` writes both into its
OUT), else the model directory's (``GROUNDSEARCH_HUBNESS``: ``default``, ``none`` or a
file). It is served only for the checkpoint it was chosen for, and only beside the
relevance model fitted on its scores (the relevance's ``info`` names its SHA-256), so
that a hit's relevance reads the score it is ranked by. A gallery photo's or caption's
penalty is computed from its stored vector the first time a query ranks it, then kept
(an item's vector never changes under its id); the caption bank's are computed with the
bank (``index.caption_bank``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from groundsearch.index.gallery import Gallery
from groundsearch.index.hits import Ranking
from groundsearch.model.runtime.hubness import (
    FILE_NAME,
    HUBNESS_KEY,
    Hubness,
    HubnessError,
    Penalty,
    corrected_order,
    file_digest,
    load_hubness,
)
from groundsearch.model.runtime.relevance import RelevanceError, RelevanceModel
from groundsearch.service.core.relevance import photo_products
from groundsearch.service.core.settings import ServiceSettings

log = logging.getLogger(__name__)

#: (photo ids, weights: rows × d) → their vectors' inner products (photos × rows).
Products = Callable[[np.ndarray, np.ndarray], np.ndarray]
#: Penalties kept (then forgotten all at once and computed again).
KEPT = 1_000_000
#: Photos whose products with the bank are taken at once.
CHUNK = 256


class Penalties:
    """``penalties(ids)``: each gallery item's penalty (one side of the hubness file:
    photos or captions), computed once from its vector's products with the bank."""

    def __init__(self, side: Penalty, products: Products, kept: int = KEPT) -> None:
        self.side, self.products, self.kept = side, products, kept
        self._known: dict[int, float] = {}
        self._lock = threading.Lock()

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, np.int64)
        unique = list(dict.fromkeys(ids.tolist()))
        with self._lock:
            known = {i: self._known[i] for i in unique if i in self._known}
        missing = np.array([i for i in unique if i not in known], np.int64)
        if missing.size:
            side = self.side
            new: dict[int, float] = {}
            for start in range(0, missing.size, CHUNK):
                part = missing[start : start + CHUNK]
                penalties = side.of_products(self.products(part, side.bank))
                new.update(zip(part.tolist(), penalties.tolist(), strict=True))
            with self._lock:
                if len(self._known) + len(new) > self.kept:
                    self._known.clear()
                self._known.update(new)
            known.update(new)
        return np.array([known[i] for i in ids.tolist()], np.float64)

    def corrected(self, ids: np.ndarray, scores: Sequence[float] | np.ndarray) -> np.ndarray:
        """Each item's score − its penalty, in the same order."""
        return np.asarray(scores, np.float64) - self(np.asarray(ids, np.int64))

    def rank(self, ranking: Ranking) -> Ranking:
        """``ranking`` re-ranked by score − penalty (the scores shown are the corrected)."""
        if not len(ranking):
            return ranking
        ids, scores = corrected_order(ranking.ids, ranking.scores, self(ranking.ids))
        return Ranking(ids, scores)


@dataclass(frozen=True)
class Served:
    """The served correction: the file's and each gallery side's kept penalties."""

    hubness: Hubness
    photos: Penalties
    captions: Penalties | None


def served_penalties(hub: Hubness | None, gallery: Gallery) -> Served | None:
    """The penalties of the gallery's photos and captions under ``hub`` (None: none)."""
    if hub is None:
        return None
    photos = Penalties(hub.photos, photo_products(gallery))
    captions = None if hub.captions is None else Penalties(hub.captions, gallery.caption_products)
    return Served(hub, photos, captions)


def relevance_on_raw(
    settings: ServiceSettings,
    relevance: RelevanceModel | None,
    status: str,
    hub: Hubness | None,
) -> tuple[RelevanceModel | None, str]:
    """The relevance served beside ``hub``: one fitted on corrected scores reads raw ones
    wrongly, so without a hubness correction it is off (RelevanceError for one the
    settings name)."""
    if relevance is None or hub is not None or not (relevance.info or {}).get(HUBNESS_KEY):
        return relevance, status
    why = "it was fitted on hubness-corrected scores, and no hubness correction is served"
    if settings.relevance != "default":
        raise RelevanceError(f"{settings.relevance}: {why}")
    log.warning("relevance off: %s", why)
    return None, f"off: {why}"


def served_hubness(
    settings: ServiceSettings,
    identity: dict[str, str],
    relevance: RelevanceModel | None,
    relevance_file: Path | None,
) -> tuple[Hubness | None, str]:
    """The hubness correction served (None: raw scores) and a line for ``/ready``; a
    file named by the settings that cannot be served raises HubnessError."""
    path = settings.beside_relevance("hubness", relevance_file, FILE_NAME)
    if path is None:
        return None, "none"
    default = settings.hubness == "default"
    if default and not path.exists():
        return None, "none (no hubness file)"
    try:
        hub = load_hubness(path, identity)
        fitted = None if relevance is None else (relevance.info or {}).get(HUBNESS_KEY)
        if relevance is not None and fitted != file_digest(path):
            raise HubnessError(
                f"the served relevance model was fitted on {'other' if fitted else 'raw'} "
                f"scores, not {path.name}'s: refit it (`groundsearch fit-relevance`)"
            )
    except HubnessError as exc:
        if not default:
            raise
        log.warning("hubness correction off: %s", exc)
        return None, f"off: {exc}"
    sides = [f"photos: k {hub.photos.k}, weight {hub.photos.weight:g}"]
    if hub.captions is not None:
        sides.append(f"captions: k {hub.captions.k}, weight {hub.captions.weight:g}")
    return hub, f"{path.name} ({'; '.join(sides)})"
