"""What the service loads once at startup, shared by every capability.

    components = Components.load(settings)     # checkpoint, parser, backbone, gallery, ...
    capabilities = Capabilities.over(components)
    components.close()

The checkpoint (``model``), the parse batcher and the text front door over it
(``sentences``, ``queries``), the image backbone (``photos``), the gallery (following
other processes' writes every second), the caption decoder (``captioner``), the caption
bank (``bank``, loaded in the background), the stage timer (``stages``) and, with
``GROUNDSEARCH_WATCH`` (``serve --watch``), the folders kept indexed (``watching``).
``Capabilities.over(components)`` builds the small objects (``service.core.capabilities``)
the routes use, once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from PIL import Image

from groundsearch.index.gallery import Gallery
from groundsearch.index.search.index_kinds import IndexSettings
from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.sentences import Sentences
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
from groundsearch.service.core.photo_vectors import PhotoVectors
from groundsearch.service.core.queries import QueryVectors
from groundsearch.service.core.relevance import Judge, served_relevance, serving_judge
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.core.thumbnails import Thumbnails
from groundsearch.service.core.timing import Observe, Stages
from groundsearch.service.core.watching import Watching
from groundsearch.service.core.writing import Captioner, served_captioner

log = logging.getLogger(__name__)

#: How often the gallery reads writes other processes committed (seconds).
FOLLOW_EVERY = 1.0


@dataclass
class Components:
    """Checkpoint, parser, backbone, gallery, decoder and caches, loaded once."""

    settings: ServiceSettings
    model: Embedder
    identity: dict[str, str]
    gallery: Gallery
    batcher: ParseBatcher
    sentences: Sentences
    queries: QueryVectors
    photos: PhotoVectors
    captioner: Captioner
    bank: BankLoader
    stages: Stages
    #: each hit's relevance (the model is None when none fits the checkpoint)
    judge: Judge
    relevance_status: str
    #: the folders the server keeps indexed (``serve --watch``), if any
    watching: Watching | None = None

    @classmethod
    def load(
        cls,
        settings: ServiceSettings,
        observe: Observe | None = None,
        parser: Parser | None = None,
    ) -> Components:
        """Load everything, warm it up, and start the caption bank's loading."""
        torch.set_num_threads(settings.torch_threads)  # process-wide
        stages = Stages(observe)
        parser = parser or Parser(
            settings.parser_dir,
            settings.cache_dir,
            use_cache=False,
            direct=not settings.parse_pipeline,
        )
        checkpoint = settings.checkpoint_path
        model: Embedder = load_checkpoint(checkpoint, parser=parser.version)
        identity = checkpoint_identity(checkpoint)
        extractor = FeatureExtractor.for_identity(model.backbone)
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
        batcher = ParseBatcher(parser, workers=settings.parse_workers)
        sentences = Sentences(model, batcher.outcomes, settings.max_text_chars)
        captioner = served_captioner(settings, identity, model, sentences, stages)
        photos = PhotoVectors(extractor, model, stages)
        relevance, relevance_status = served_relevance(settings, identity)
        judge = serving_judge(settings, identity, relevance, model, gallery)
        _warm_up(sentences, photos, captioner)
        watching = None
        if settings.watch_folders:  # last: its full pass writes what the routes then read
            watching = Watching.start(settings, model, gallery)
        return cls(
            settings=settings,
            model=model,
            identity=identity,
            gallery=gallery,
            batcher=batcher,
            sentences=sentences,
            queries=QueryVectors(sentences, stages, settings.query_cache),
            photos=photos,
            captioner=captioner,
            bank=BankLoader(settings, model, identity),
            stages=stages,
            judge=judge,
            relevance_status=relevance_status,
            watching=watching,
        )

    def close(self) -> None:
        """Stop watching folders and the parser threads (and processes); close the gallery."""
        if self.watching is not None:
            self.watching.close()
        self.batcher.close()
        self.gallery.close()


def _warm_up(sentences: Sentences, photos: PhotoVectors, captioner: Captioner) -> None:
    """Load the stanza pipeline and the ensemble members now, not on a first request."""
    sentences.vectors(["A dog runs on the beach ."])
    features = photos.extractor.embed_images([Image.new("RGB", (64, 64))])
    vec = photos.model.embed_images(features)  # not timed: no request's stage
    if captioner.decoder is not None:
        captioner.decoder.generate(vec, beam=1, max_len=3)


@dataclass(frozen=True)
class Capabilities:
    """One object per capability, built once over the components."""

    search: Search
    photo_search: PhotoSearch
    photos: Photos
    library: Library
    describe: Describe
    arithmetic: Arithmetic
    explain: Explain
    writes: GalleryWrites
    status: Status

    @classmethod
    def over(cls, c: Components) -> Capabilities:
        return cls(
            search=Search(c.queries, c.gallery, c.stages, c.judge),
            photo_search=PhotoSearch(
                c.photos, c.queries, c.gallery, c.stages, c.judge, c.judge.channel_columns
            ),
            photos=Photos(c.gallery, c.judge, Thumbnails(max_pixels=c.settings.max_pixels)),
            library=Library(c.gallery),
            describe=Describe(
                c.photos, c.queries, c.gallery, c.bank, c.captioner, c.stages, c.judge
            ),
            arithmetic=Arithmetic(
                c.model, c.photos, c.queries, c.gallery, c.captioner, c.stages, c.judge
            ),
            explain=Explain(c.model, c.queries, c.stages),
            writes=GalleryWrites(c.photos, c.queries, c.gallery),
            status=Status(c),
        )
