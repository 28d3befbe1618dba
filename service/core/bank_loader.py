"""The caption bank ``/describe`` draws from, loaded (or embedded once and cached) in a
background thread: the server answers meanwhile, from the gallery's captions alone."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from groundsearch.index.caption_bank import CaptionBank, captions_from, training_captions
from groundsearch.index.ingest.sample_gallery import SAMPLE_CAPTIONS
from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.hubness import Penalty
from groundsearch.model.runtime.parsing import Parser
from groundsearch.service.core.settings import ServiceSettings

log = logging.getLogger("groundsearch.service")


class BankLoader:
    """The bank once loaded (``bank``) and a line for ``/ready`` meanwhile (``status``);
    ``background=False`` loads it at once; ``penalty``: ranks by score − penalty."""

    def __init__(
        self,
        settings: ServiceSettings,
        model: Embedder,
        identity: dict[str, str],
        background: bool = True,
        penalty: Penalty | None = None,
    ):
        self.settings, self.model, self.identity = settings, model, identity
        self.penalty = penalty
        self.bank: CaptionBank | None = None
        self.status = "none" if settings.caption_bank == "none" else "loading"
        if settings.caption_bank == "none":
            return
        if background:
            threading.Thread(target=self._load, name="caption-bank", daemon=True).start()
        else:
            self._load()

    def _load(self) -> None:
        s = self.settings
        try:
            if s.caption_bank == "training":
                texts, name = training_captions(s.data_dir, SAMPLE_CAPTIONS)
            else:
                texts, name = captions_from(Path(s.caption_bank))
            self.status = f"embedding {name} ({len(texts)} captions)"
            parser = Parser(**s.parser_options())
            self.bank = CaptionBank.load_or_build(
                name, texts, self.model, parser, self.identity, s.cache_dir, s.bank_parse_workers,
                self.penalty,
            )  # fmt: skip
            self.status = f"{name} ({len(self.bank)} captions)"
        except Exception as exc:  # the gallery's captions still answer /describe
            self.status = f"failed: {exc}"
            log.exception("could not load the caption bank")
