"""What the server serves: for ``/ready`` and the gallery sizes of ``/metrics``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groundsearch.index.gallery import Gallery
from groundsearch.service.core.bank_loader import BankLoader
from groundsearch.service.core.writing import Captioner


@dataclass(eq=False)
class Status:
    """The gallery's, bank's and decoder's states when asked, and what is fixed (``served``)."""

    gallery: Gallery
    bank: BankLoader
    captioner: Captioner
    served: Mapping[str, Any]

    def counts(self) -> dict[str, int]:
        return self.gallery.counts()

    def readiness(self) -> dict[str, Any]:
        """The facts ``/ready`` answers with (``http.schemas.Readiness``)."""
        counts = self.counts()
        return dict(
            ready=True,
            images=counts["images"],
            captions=counts["captions"],
            caption_bank=self.bank.status,
            indexes=self.gallery.indexes.describe(),
            decoder=self.captioner.status,
            **self.served,
        )
