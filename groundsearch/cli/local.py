"""The service's capabilities over a gallery on disk, for one command and no server: the
gallery opened as a read-only replica, the service core's answers (no FastAPI), only what
a command needs loaded."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groundsearch.cli.common import CliError, user_errors

if TYPE_CHECKING:
    from groundsearch.index.gallery import Gallery
    from groundsearch.index.ranking.photo_pages import PageAsk
    from groundsearch.service.core.components import Capabilities, Components
    from groundsearch.service.core.settings import ServiceSettings


class Clock:
    """Seconds per phase of a command, from its start (``--timings``)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        begun = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - begun

    def report(self, answer: dict[str, Any] | None = None) -> str:
        """One line: each phase and the query's stages (``timings_ms``), in seconds."""
        parts = [f"{name} {seconds:.3f}" for name, seconds in self.phases.items()]
        for stage, ms in ((answer or {}).get("timings_ms") or {}).items():
            parts.append(f"{stage} {ms / 1000:.3f}")
        total = time.perf_counter() - self.start
        return "timings (s): " + ", ".join(parts) + f"; command {total:.3f}"


def require_gallery(settings: ServiceSettings) -> None:
    """CliError at once (before the model is loaded) when no gallery is there."""
    from groundsearch.index.gallery import is_gallery, is_legacy_gallery

    folder = settings.index_path
    if not is_gallery(folder) and not is_legacy_gallery(folder):
        raise CliError(
            f"no gallery at {folder} (make one with `groundsearch index PHOTOS --index "
            f"{folder}`, or name another with --index)"
        )


def open_gallery(settings: ServiceSettings) -> tuple[Gallery, dict[str, str]]:
    """The served gallery, read-only, and the checkpoint's identity (CliError: no
    gallery there, another model's, or a format its writer must migrate first)."""
    from groundsearch.index.errors import StoreError
    from groundsearch.index.gallery import Gallery
    from groundsearch.model.runtime.checkpoints import checkpoint_identity

    checkpoint = settings.checkpoint_path
    if not checkpoint.is_file():
        raise CliError(f"no checkpoint at {checkpoint}")
    with user_errors(StoreError, OSError):
        identity = checkpoint_identity(checkpoint)
        return Gallery.open(settings.index_path, identity, read_only=True), identity


@dataclass(eq=False)
class LocalGallery:
    """A gallery on disk with the service's own core over it (``Components.open``): the
    answers of the server's routes, each hit with the ``path`` of its file."""

    components: Components
    capabilities: Capabilities
    clock: Clock = field(default_factory=Clock)

    @classmethod
    def open(cls, settings: ServiceSettings, clock: Clock | None = None) -> LocalGallery:
        """The gallery (read-only), the checkpoint, the parser (with its disk cache) and
        the relevance model; CliError for what cannot be opened. ``clock`` times each."""
        clock = clock or Clock()
        with clock.phase("imports"):  # torch, FAISS: timed apart from what they load
            from groundsearch.service.core.components import Capabilities, Components
        with clock.phase("gallery"):
            gallery, identity = open_gallery(settings)
        try:
            from groundsearch.model.runtime.checkpoints import CheckpointError
            from groundsearch.model.runtime.fusion import FusionError
            from groundsearch.model.runtime.hubness import HubnessError
            from groundsearch.model.runtime.relevance import RelevanceError

            errors = (CheckpointError, RelevanceError, HubnessError, FusionError, OSError)
            with clock.phase("model"), user_errors(*errors):
                components = Components.open(settings, gallery, identity)
        except BaseException:
            gallery.close(snapshot=False)
            raise
        return cls(components, Capabilities(components), clock)

    def close(self) -> None:
        self.components.close()

    def search(self, text: str, ask: PageAsk, min_relevance: float | None) -> dict[str, Any]:
        """``/search``'s answer for ``text`` (the page ``ask`` wants)."""
        from groundsearch.index.ranking.pages import CursorError
        from groundsearch.service.http.schemas import SearchResponse, page_hits

        search = self.capabilities.search
        try:
            page, timings, threshold = search.run(search.clean(text), ask, min_relevance)
        except CursorError as exc:
            raise CliError(f"--cursor: {exc}") from None
        answer = SearchResponse(
            query=text, order=ask.order, **page_hits(page, threshold), timings_ms=timings
        ).model_dump(mode="json")
        for hit in answer["results"] + answer["weak"]:
            hit["path"] = self._path(hit["id"])
        return answer

    def describe(
        self,
        photo: Path,
        k: int = 5,
        sentences: str = "both",
        beam: int | None = None,
        min_relevance: float | None = None,
    ) -> dict[str, Any]:
        """``/describe``'s answer for a photo file (the caption bank is read unless only
        written sentences are asked for)."""
        from groundsearch.model.runtime.captioning import DecoderError
        from groundsearch.model.runtime.images.photos import PhotoError, decode_photo
        from groundsearch.service.http.schemas import DescribeResponse

        c, clock = self.components, self.clock
        with clock.phase("backbone"):
            min_side = c.photos.min_side
        with user_errors(PhotoError), clock.phase("decode"):
            image, _ = decode_photo(photo, c.settings.max_pixels, min_side=min_side)
        with user_errors(DecoderError), clock.phase("decoder"):
            decoder = c.captioner.decoder
        if sentences == "generated" and decoder is None:
            raise CliError(f"no sentences can be written: caption decoder {c.captioner.status}")
        retrieved = sentences != "generated"
        if retrieved:
            with clock.phase("caption bank"):
                if c.bank.status.startswith("failed"):
                    print(f"caption bank {c.bank.status}", file=sys.stderr)
        written = sentences == "generated" or (sentences == "both" and decoder is not None)
        found = self.capabilities.describe.run(image, k, retrieved, written, beam)
        threshold = c.judge.threshold(min_relevance)
        answer = DescribeResponse.of(found, threshold, retrieved).model_dump(mode="json")
        for hit in answer["results"] + answer["weak"]:
            hit["path"] = None if hit["image_id"] is None else self._path(hit["image_id"])
        return answer

    def _path(self, image_id: int) -> str:
        """Where a photo's file is: the first of its files still on disk, else the one recorded."""
        from groundsearch.index.errors import UnknownItemError

        gallery = self.components.gallery
        try:
            return str(gallery.photo_path(image_id))
        except UnknownItemError:
            record = gallery.image(image_id)
            return str(gallery.folder / record.path) if record.uploaded else record.path
