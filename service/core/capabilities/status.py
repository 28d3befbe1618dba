"""What the server serves: for ``/ready`` and the gallery sizes of ``/metrics``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from groundsearch.service.core.components import Components


@dataclass(eq=False)
class Status:
    """The served checkpoint, gallery, caption bank and decoder, in facts."""

    components: Components

    def counts(self) -> dict[str, int]:
        return self.components.gallery.counts()

    def readiness(self) -> dict[str, Any]:
        """The facts ``/ready`` answers with (``http.schemas.Readiness``)."""
        c = self.components
        counts = self.counts()
        channel = getattr(c.model, "concepts", None)  # the open-vocabulary channel
        return dict(
            ready=True,
            model=c.settings.served_model,
            encoder=c.model.encoder,
            checkpoint=c.identity["checkpoint_sha256"],
            images=counts["images"],
            captions=counts["captions"],
            caption_bank=c.bank.status,
            indexes=c.gallery.indexes.describe(),
            read_only=c.settings.read_only,
            decoder=c.captioner.status,
            concepts=channel.config.weight if channel is not None else 0.0,
            relevance=c.relevance_status,
            hubness=c.hubness_status,
            fusion=c.fusion_status,
        )
