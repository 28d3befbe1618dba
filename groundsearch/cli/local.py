"""The service's capabilities over a gallery on disk, for one command and no server.

    local = LocalGallery.open(settings)          # the gallery, read-only, and its checkpoint
    local.search(text, ask, min_relevance)       # the API's /search answer, as a dict
    local.describe(photo_path, k)                # the API's /describe answer, as a dict

The gallery is opened as a read-only replica opens it (``Gallery.open(read_only=True)``):
its records through SQLite's WAL, which sees a consistent committed state while an
indexer or a server writes, its search indexes from the writer's snapshots caught up
from the records (nothing is written: no snapshot, no migration). The answers are the
service's own: ``Search`` and ``Describe`` (``service.core.capabilities``) with the served
relevance model and the caption decoder, and the response models of
``service.http.schemas`` — no FastAPI module is imported. What one command does not need is
not loaded: a search loads no image backbone, decoder or caption bank, and reads the
query's parse from the disk parse cache (stanza is loaded only for a text never parsed
before).
"""

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
    from groundsearch.model.runtime.embedder import Embedder
    from groundsearch.model.runtime.parsing import Parser
    from groundsearch.model.runtime.sentences import Sentences
    from groundsearch.service.core.relevance import Judge
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
    """A gallery on disk with the model that built it, loaded as far as asked."""

    settings: ServiceSettings
    gallery: Gallery
    identity: dict[str, str]
    parser: Parser
    model: Embedder
    door: Sentences
    judge: Judge
    clock: Clock = field(default_factory=Clock)

    @classmethod
    def open(cls, settings: ServiceSettings, clock: Clock | None = None) -> LocalGallery:
        """The gallery (read-only), the checkpoint, the parser (with its disk cache) and
        the relevance model; CliError for what cannot be opened. ``clock`` times each."""
        clock = clock or Clock()
        with clock.phase("imports"):  # torch, FAISS: timed apart from what they load
            import torch  # noqa: F401

            from groundsearch.index.gallery import Gallery  # noqa: F401
        with clock.phase("gallery"):
            gallery, identity = open_gallery(settings)
        try:
            with clock.phase("model"):
                from groundsearch.model.runtime.checkpoints import (
                    CheckpointError,
                    load_checkpoint,
                )
                from groundsearch.model.runtime.parsing import Parser
                from groundsearch.model.runtime.relevance import RelevanceError
                from groundsearch.model.runtime.sentences import Sentences
                from groundsearch.service.core.relevance import served_relevance

                parser = Parser(
                    settings.parser_dir, settings.cache_dir, direct=not settings.parse_pipeline
                )
                with user_errors(CheckpointError, RelevanceError, OSError):
                    model = load_checkpoint(settings.checkpoint_path, parser=parser.version)
                    relevance, _ = served_relevance(settings, identity)
            if getattr(model, "concepts", None) is not None:
                with clock.phase("glove"):  # what every text's concept vector reads
                    from groundsearch.model.runtime.concepts import glove_table

                    glove_table()
        except BaseException:
            gallery.close(snapshot=False)
            raise
        door = Sentences(model, parser.parse, settings.max_text_chars)
        from groundsearch.service.core.relevance import serving_judge

        judge = serving_judge(settings, identity, relevance, model, gallery)
        return cls(settings, gallery, identity, parser, model, door, judge, clock)

    def close(self) -> None:
        self.gallery.close(snapshot=False)

    def path_of(self, image_id: int, fallback: str, uploaded: bool) -> str:
        """Where a photo's file is: the first of its files still on disk, else the one
        recorded."""
        from groundsearch.index.errors import UnknownItemError

        try:
            return str(self.gallery.photo_path(image_id))
        except UnknownItemError:
            return str(self.gallery.folder / fallback) if uploaded else fallback

    def search(self, text: str, ask: PageAsk, min_relevance: float | None) -> dict[str, Any]:
        """``/search``'s answer for ``text`` (the page ``ask`` wants), each hit with the
        ``path`` of its file."""
        with self.clock.phase("service imports"):
            from groundsearch.index.ranking.pages import CursorError
            from groundsearch.service.core.capabilities.search import Search
            from groundsearch.service.core.queries import QueryVectors
            from groundsearch.service.core.timing import Stages
            from groundsearch.service.http.schemas import SearchResponse, page_hits

        stages = Stages()
        search = Search(QueryVectors(self.door, stages, 0), self.gallery, stages, self.judge)
        cleaned = search.clean(text)
        try:
            page, timings, threshold = search.run(cleaned, ask, min_relevance)
        except CursorError as exc:
            raise CliError(f"--cursor: {exc}") from None
        answer = SearchResponse(
            query=text, order=ask.order, **page_hits(page, threshold), timings_ms=timings
        ).model_dump(mode="json")
        paths = {h.id: h.item for h in page.hits}
        for hit in answer["results"] + answer["weak"]:
            record: Any = paths[hit["id"]]
            hit["path"] = self.path_of(record.id, record.path, record.uploaded)
        return answer

    def describe(
        self,
        photo: Path,
        k: int = 5,
        sentences: str = "both",
        beam: int | None = None,
        min_relevance: float | None = None,
    ) -> dict[str, Any]:
        """``/describe``'s answer for a photo file: written sentences (when the
        checkpoint has a caption decoder), the ``k`` best captions of the gallery and the
        caption bank, and what the backbone's classifier saw; each gallery caption with
        the ``path`` of its photo."""
        from groundsearch.model.runtime.captioning import DecoderError
        from groundsearch.model.runtime.images.features import FeatureExtractor
        from groundsearch.model.runtime.images.photos import PhotoError, decode_photo
        from groundsearch.service.core.bank_loader import BankLoader
        from groundsearch.service.core.capabilities.describe import Describe
        from groundsearch.service.core.photo_vectors import PhotoVectors
        from groundsearch.service.core.queries import QueryVectors
        from groundsearch.service.core.timing import Stages
        from groundsearch.service.core.writing import served_captioner
        from groundsearch.service.http.schemas import (
            Concept,
            DescribeResponse,
            WrittenSentence,
            caption_hits,
        )

        s, clock = self.settings, self.clock
        with clock.phase("backbone"):
            extractor = FeatureExtractor.for_identity(self.model.backbone)
        with user_errors(PhotoError), clock.phase("decode"):
            image, _ = decode_photo(photo, s.max_pixels, min_side=extractor.spec.resize)
        stages = Stages()
        with user_errors(DecoderError), clock.phase("decoder"):
            captioner = served_captioner(s, self.identity, self.model, self.door, stages)
        decoder = captioner.decoder
        if sentences == "generated" and decoder is None:
            raise CliError(f"no sentences can be written: caption decoder {captioner.status}")
        retrieved = sentences != "generated"
        with clock.phase("caption bank"):
            bank = BankLoader(
                s if retrieved else s.model_copy(update={"caption_bank": "none"}),
                self.model,
                self.identity,
                background=False,
            )
        if bank.status.startswith("failed"):
            print(f"caption bank {bank.status}", file=sys.stderr)
        queries = QueryVectors(self.door, stages, 0)
        photos = PhotoVectors(extractor, self.model, stages)
        capability = Describe(photos, queries, self.gallery, bank, captioner, stages, self.judge)
        written = sentences == "generated" or (sentences == "both" and decoder is not None)
        hits, wrote, seen, timings = capability.run(image, k, retrieved, written, beam)
        threshold = self.judge.threshold(min_relevance)
        answer = DescribeResponse(
            generated=[WrittenSentence.of(g) for g in wrote],
            concepts=[Concept.of(c) for c in seen],
            **caption_hits(hits, threshold, retrieved),
            timings_ms=timings,
        ).model_dump(mode="json")
        for hit in answer["results"] + answer["weak"]:
            if hit["image_id"] is not None:
                record = self.gallery.image(hit["image_id"])
                hit["path"] = self.path_of(record.id, record.path, record.uploaded)
            else:
                hit["path"] = None
        return answer
