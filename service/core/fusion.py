"""The served short-query fusion (``model.runtime.fusion``): a query of a word or two is
ranked by its joint score fused with what each photo shows.

The file is ``fusion.json`` beside the relevance file (``make refit`` writes both into its
OUT), else the model directory's (``GROUNDSEARCH_FUSION``: ``default``, ``none`` or a
file). It is served only for the checkpoint it was chosen for and with the evidence the
relevance reads (the stored classes, the vector tagger); a hit's relevance still reads
its joint score (``Ranking.joint``), with its evidence. The fused candidates are a
ranking's first ``WINDOW`` photos by the joint score (the page's window), each query's
scores standardised over them; photos past the window keep their order below them, so
every page of a query reads the same scores.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from groundsearch.index.hits import Ranking
from groundsearch.index.ranking.pages import WINDOW
from groundsearch.model.runtime.fusion import FILE_NAME, Fusion, FusionError, load_fusion
from groundsearch.service.core.relevance import Judge
from groundsearch.service.core.settings import ServiceSettings

log = logging.getLogger(__name__)


def served_fusion(
    settings: ServiceSettings, identity: dict[str, str], judge: Judge, relevance_file: Path | None
) -> tuple[Fusion | None, str]:
    """The fusion served (None: joint scores alone) and a line for ``/ready``; a file
    named by the settings that cannot be served raises FusionError."""
    path = settings.beside_relevance("fusion", relevance_file, FILE_NAME)
    if path is None:
        return None, "none"
    default = settings.fusion == "default"
    if default and not path.exists():
        return None, "none (no fusion file)"
    try:
        fusion = load_fusion(path, identity)
        if judge.tagger is None and judge.nouns is None:
            raise FusionError("no evidence is served (the relevance model reads none)")
    except FusionError as exc:
        if not default:
            raise
        log.warning("short-query fusion off: %s", exc)
        return None, f"off: {exc}"
    lengths = "; ".join(
        f"{n} word{'s' * (n > 1)}: classes {c:g}, tagger {t:g}"
        for n, (c, t) in enumerate(fusion.weights, 1)
        if c or t
    )
    return fusion, f"{path.name} ({lengths or 'no query fused'})"


@dataclass(frozen=True)
class Fuser:
    """A query's ranking fused with its hits' evidence (``judge.channels``)."""

    fusion: Fusion
    judge: Judge
    window: int = WINDOW

    def applies(self, content_words: int, nouns: Sequence[str]) -> bool:
        return self.fusion.applies(content_words, len(nouns))

    def rank(self, ranking: Ranking, nouns: Sequence[str], words: int) -> Ranking:
        """``ranking`` (best first) of a query of ``words`` content words with its first
        ``window`` hits re-ranked by their fused scores, the rest after them in their order
        (scores shifted below); each hit's joint score kept for its relevance."""
        n = min(len(ranking), self.window)
        if n < 2:
            return ranking
        head = ranking.ids[:n]
        classes, tagger = self.judge.channels(nouns, head)
        fused = self.fusion.fuse(ranking.scores[:n], classes, tagger, words)
        order = np.argsort(-fused, kind="stable")
        ids, scores, joint = head[order], fused[order], ranking.scores[:n][order]
        rest = ranking.scores[n:]
        if rest.size:  # below the window's last fused score, in their own order
            shifted = rest - rest[0] + min(float(scores[-1]), float(rest[0]))
            shifted = np.minimum(shifted, np.nextafter(scores[-1], -np.inf))
            ids = np.concatenate([ids, ranking.ids[n:]])
            scores = np.concatenate([scores, shifted])
            joint = np.concatenate([joint, rest])
        return Ranking(ids, scores, ranking.taken_at, joint)
