"""What the service loads once, shared by every capability (the server, or one CLI
command); the backbone, decoder and caption bank when first used (``load`` warms them)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property

import torch
from PIL import Image
from threadpoolctl import threadpool_limits

from groundsearch.index.gallery import Gallery
from groundsearch.index.search.index_kinds import IndexSettings
from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.objects.detector import ObjectDetector, installed_detector
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.sentences import ParseFn, Sentences
from groundsearch.service.core.bank_loader import BankLoader
from groundsearch.service.core.batching import ParseBatcher
from groundsearch.service.core.capabilities.arithmetic import Arithmetic
from groundsearch.service.core.capabilities.describe import Describe
from groundsearch.service.core.capabilities.explain import Explain
from groundsearch.service.core.capabilities.gallery_writes import GalleryWrites
from groundsearch.service.core.capabilities.library import Library
from groundsearch.service.core.capabilities.photos import Photos
from groundsearch.service.core.capabilities.search import PhotoSearch, Search
from groundsearch.service.core.capabilities.status import Status
from groundsearch.service.core.fusion import Fuser, served_fusion, served_objects
from groundsearch.service.core.hubness import (
    Served,
    relevance_on_raw,
    served_hubness,
    served_penalties,
)
from groundsearch.service.core.photo_vectors import PhotoVectors
from groundsearch.service.core.queries import QueryVectors
from groundsearch.service.core.relevance import (
    Judge,
    relevance_path,
    served_relevance,
    serving_judge,
)
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.core.thumbnails import Thumbnails
from groundsearch.service.core.timing import Observe, Stages
from groundsearch.service.core.watching import Watching
from groundsearch.service.core.writing import Captioner, served_captioner

log = logging.getLogger(__name__)

#: How often the server's gallery reads writes other processes committed (seconds).
FOLLOW_EVERY = 1.0


@dataclass(eq=False)
class Components:
    """Checkpoint, parser, gallery and relevance; backbone, decoder and caption bank when
    first used."""

    settings: ServiceSettings
    model: Embedder
    identity: dict[str, str]
    gallery: Gallery
    sentences: Sentences
    queries: QueryVectors
    stages: Stages
    #: each hit's relevance (the model is None when none fits the checkpoint)
    judge: Judge
    relevance_status: str
    #: rankings corrected for hubness: the gallery's penalties (None: raw scores)
    hubness: Served | None = None
    hubness_status: str = "none"
    #: short queries ranked by their fused scores (None: joint scores alone)
    fuser: Fuser | None = None
    fusion_status: str = "none"
    #: the server's parse threads (a command parses in its own thread)
    batcher: ParseBatcher | None = None
    #: the folders the server keeps indexed (``serve --watch``), if any
    watching: Watching | None = None

    @classmethod
    def load(
        cls,
        settings: ServiceSettings,
        observe: Observe | None = None,
        parser: Parser | None = None,
        niceness: int = 0,
    ) -> Components:
        """Everything the server serves, warmed up (the caption bank loading meanwhile)."""
        _set_threads(settings)
        parser = parser or Parser(**settings.parser_options(use_cache=False))
        model = load_checkpoint(settings.checkpoint_path, parser=parser.version)
        identity = checkpoint_identity(settings.checkpoint_path)
        search = IndexSettings(
            nprobe=settings.search_nprobe,
            k_factor=settings.search_k_factor,
            ef_search=settings.hnsw_ef_search,
        )
        gallery: Gallery
        if settings.shards is not None:  # the photos searched on Ray Serve shards
            from groundsearch.service.core.sharding import sharded_gallery

            gallery = sharded_gallery(
                settings.index_path, settings.shards, identity, search, settings.ray_address
            )
        else:
            gallery = Gallery.open(settings.index_path, identity, settings.read_only, search)
        gallery.indexes.follow(FOLLOW_EVERY)  # writes of other processes appear within a second
        batcher = ParseBatcher(
            parser,
            workers=settings.parse_workers,
            warm_words=settings.parse_warm_words,
            niceness=niceness,
        )
        stages = Stages(observe)
        c = cls._over(
            settings, model, identity, gallery, batcher.outcomes, stages, settings.query_cache
        )
        c.batcher = batcher
        c._warm_up()
        if settings.watch_folders:  # last: its full pass writes what the routes then read
            c.watching = Watching.start(settings, model, gallery, c.detector)
        return c

    @classmethod
    def open(
        cls, settings: ServiceSettings, gallery: Gallery, identity: dict[str, str]
    ) -> Components:
        """For one command over ``gallery``: checkpoint, parser cache and relevance."""
        _set_threads(settings)  # as the server's: a command's answer is the server's
        parser = Parser(**settings.parser_options())
        model = load_checkpoint(settings.checkpoint_path, parser=parser.version)
        return cls._over(settings, model, identity, gallery, parser.parse, Stages())

    @classmethod
    def _over(
        cls,
        settings: ServiceSettings,
        model: Embedder,
        identity: dict[str, str],
        gallery: Gallery,
        parse: ParseFn,
        stages: Stages,
        query_cache: int = 0,
    ) -> Components:
        sentences = Sentences(model, parse, settings.max_text_chars)
        relevance, status = served_relevance(settings, identity)
        hub, hub_status = served_hubness(settings, identity, relevance, relevance_path(settings))
        relevance, status = relevance_on_raw(settings, relevance, status, hub)
        judge = serving_judge(settings, identity, relevance, model, gallery)
        fusion, fusion_status = served_fusion(settings, identity, judge, relevance_path(settings))
        queries = QueryVectors(sentences, stages, query_cache)
        return cls(
            settings, model, identity, gallery, sentences, queries, stages, judge, status,
            hubness=served_penalties(hub, gallery), hubness_status=hub_status,
            fuser=Fuser(fusion, judge, served_objects(settings, gallery)) if fusion else None,
            fusion_status=fusion_status,
        )  # fmt: skip

    @cached_property
    def detector(self) -> ObjectDetector | None:
        """The object detector new photos' scores are stored with (None: not installed)."""
        return installed_detector(self.settings)

    @cached_property
    def photos(self) -> PhotoVectors:
        """Photos' vectors through the checkpoint's backbone."""
        extractor = FeatureExtractor.for_identity(self.model.backbone)
        return PhotoVectors(extractor, self.model, self.stages)

    @cached_property
    def captioner(self) -> Captioner:
        """The served caption decoder (``captioner.decoder`` None when none fits)."""
        return served_captioner(
            self.settings, self.identity, self.model, self.sentences, self.stages
        )

    @cached_property
    def bank(self) -> BankLoader:
        """The caption bank: the server's loads in the background, a command's at once."""
        side = self.hubness.hubness.captions if self.hubness else None
        return BankLoader(self.settings, self.model, self.identity, self.batcher is not None, side)

    def _warm_up(self) -> None:
        """Load the parser, backbone, decoder and members now; start loading the bank."""
        self.sentences.vectors(["A dog runs on the beach ."])
        features = self.photos.extractor.embed_images([Image.new("RGB", (64, 64))])
        vec = self.model.embed_images(features)  # not timed: no request's stage
        if self.captioner.decoder is not None:
            self.captioner.decoder.generate(vec, beam=1, max_len=3)
        _ = self.bank

    def close(self) -> None:
        """Stop watching and parsing; close the gallery (a command's without a snapshot)."""
        if self.watching is not None:
            self.watching.close()
        if self.batcher is not None:
            self.batcher.close()
            self.gallery.close()
        else:
            self.gallery.close(snapshot=False)


class Capabilities:
    """One object per capability over the components, each built on first use, once."""

    def __init__(self, components: Components) -> None:
        self.components = components

    @classmethod
    def over(cls, c: Components) -> Capabilities:
        """The server's capabilities, all built now (none twice by two requests)."""
        capabilities = cls(c)
        for name, member in vars(cls).items():
            if isinstance(member, cached_property):
                getattr(capabilities, name)
        return capabilities

    @cached_property
    def search(self) -> Search:
        c = self.components
        penalties = c.hubness.photos if c.hubness else None
        return Search(c.queries, c.gallery, c.stages, c.judge, penalties, c.fuser)

    @cached_property
    def photo_search(self) -> PhotoSearch:
        c = self.components
        return PhotoSearch(
            c.photos, c.queries, c.gallery, c.stages, c.judge, c.judge.channel_columns
        )

    @cached_property
    def photos(self) -> Photos:
        c = self.components
        return Photos(c.gallery, c.judge, Thumbnails(max_pixels=c.settings.max_pixels))

    @cached_property
    def library(self) -> Library:
        return Library(self.components.gallery)

    @cached_property
    def describe(self) -> Describe:
        c = self.components
        return Describe(
            c.photos, c.queries, c.gallery, c.bank, c.captioner, c.stages, c.judge,
            c.hubness.captions if c.hubness else None,
        )  # fmt: skip

    @cached_property
    def arithmetic(self) -> Arithmetic:
        c = self.components
        return Arithmetic(c.model, c.photos, c.queries, c.gallery, c.captioner, c.stages, c.judge)

    @cached_property
    def explain(self) -> Explain:
        c = self.components
        return Explain(c.model, c.queries, c.stages)

    @cached_property
    def writes(self) -> GalleryWrites:
        c = self.components
        return GalleryWrites(c.photos, c.queries, c.gallery, c.detector)

    @cached_property
    def status(self) -> Status:
        c = self.components
        channel = getattr(c.model, "concepts", None)  # the open-vocabulary channel
        served = dict(
            model=c.settings.served_model, encoder=c.model.encoder,
            checkpoint=c.identity["checkpoint_sha256"], read_only=c.settings.read_only,
            relevance=c.relevance_status, hubness=c.hubness_status, fusion=c.fusion_status,
            concepts=channel.config.weight if channel is not None else 0.0,
        )  # fmt: skip
        return Status(c.gallery, c.bank, c.captioner, served)


def _set_threads(settings: ServiceSettings) -> None:
    """The process's torch and BLAS threads: a query's vector, to the last bit, depends on
    them."""
    torch.set_num_threads(settings.torch_threads)  # process-wide, and numpy's BLAS too
    threadpool_limits(settings.torch_threads, user_api="blas")
