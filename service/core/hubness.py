"""The served hubness correction (``model.runtime.hubness``), only for its checkpoint and
beside the relevance fitted on its scores; an item's penalty is kept once computed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from groundsearch.index.gallery import Gallery
from groundsearch.model.runtime.hubness import (
    FILE_NAME,
    HUBNESS_KEY,
    Hubness,
    HubnessError,
    Penalties,
    file_digest,
    load_hubness,
)
from groundsearch.model.runtime.relevance import RelevanceError, RelevanceModel
from groundsearch.service.core.relevance import photo_products
from groundsearch.service.core.settings import ServiceSettings

log = logging.getLogger(__name__)


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
    settings: ServiceSettings, relevance: RelevanceModel | None, status: str, hub: Hubness | None
) -> tuple[RelevanceModel | None, str]:
    """The relevance served beside ``hub``: one fitted on corrected scores is off without
    a correction (RelevanceError for one the settings name)."""
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
    """The hubness correction served (None: raw scores) and a line for ``/ready``."""
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
