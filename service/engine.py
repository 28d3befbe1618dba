"""The query pipeline behind the routes: parse → encode → search, timed and cached.

One ``Engine`` holds what is loaded once at startup — the checkpoint, the parser, the
image backbone and the gallery — and does the blocking work (the routes call it from
worker threads). Every stage is timed (``timings`` in answers, ``observe`` for metrics);
query vectors are kept in an LRU cache. Gallery writes go to ``Gallery``, which commits
each as one transaction; the gallery follows other processes' writes every second.
``/describe`` also draws from a caption bank (``CaptionBank``), loaded in the background,
and writes new sentences with the caption decoder (``captioning``) when one is loaded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from groundsearch.index.caption_bank import CaptionBank, captions_from, training_captions
from groundsearch.index.gallery import Gallery, ImageRecord
from groundsearch.index.index_kinds import IndexSettings
from groundsearch.index.sample_gallery import SAMPLE_CAPTIONS
from groundsearch.model.runtime.arithmetic import arithmetic_query, centre_rerank
from groundsearch.model.runtime.captioning import (
    CaptionDecoder,
    DecoderError,
    Generated,
    load_decoder,
    rerank,
)
from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.images.photos import EXTENSIONS
from groundsearch.model.runtime.parsing import DependencyTree, ParseError, Parser, clean_text
from groundsearch.model.runtime.text.vocab import NoKnownWordError
from groundsearch.service.batching import ParseBatcher
from groundsearch.service.settings import ServiceSettings

Timings = dict[str, float]
ImageHits = list[tuple[ImageRecord, float]]
#: How often the gallery reads writes other processes committed (seconds).
FOLLOW_EVERY = 1.0


@dataclass(frozen=True)
class Description:
    """A caption that describes a photo: from the gallery (with its photo) or the bank."""

    text: str
    score: float
    source: str
    id: int | None = None
    image_id: int | None = None


log = logging.getLogger("groundsearch.service")


class NoDecoder(RuntimeError):
    """A written sentence was asked for, but the server has no caption decoder."""


class QueryError(ValueError):
    """A text the service refuses (e.g. over the length limit): HTTP 422."""


class UnusableText(QueryError):
    """A text the model cannot use — empty, whitespace, control characters or punctuation
    only, or no word the model knows — refused with one message whatever the reason."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} has no word the model knows: write a phrase or sentence in English "
            "with at least one common word, e.g. 'a dog runs on the beach'"
        )


class Engine:
    """Checkpoint, parser, backbone and gallery, loaded once."""

    def __init__(
        self,
        settings: ServiceSettings,
        observe: Callable[[str, float], None] | None = None,
        parser: Parser | None = None,
    ) -> None:
        self.settings = settings
        torch.set_num_threads(settings.torch_threads)  # process-wide
        self.observe = observe or (lambda stage, seconds: None)
        self.parser = parser or Parser(settings.parser_dir, settings.cache_dir, use_cache=False)
        checkpoint = settings.checkpoint_path
        self.model: Embedder = load_checkpoint(checkpoint, parser=self.parser.version)
        self.identity = checkpoint_identity(checkpoint)
        self.extractor = FeatureExtractor.for_identity(self.model.backbone)
        search = IndexSettings(
            nprobe=settings.search_nprobe,
            k_factor=settings.search_k_factor,
            ef_search=settings.hnsw_ef_search,
        )
        self.gallery = Gallery.open(settings.index_path, self.identity, settings.read_only, search)
        self.gallery.follow(FOLLOW_EVERY)  # writes of other processes appear within a second
        self.batcher = ParseBatcher(self.parser, workers=settings.parse_workers)
        self.decoder, self.decoder_status = self._load_decoder()
        self._warm_up()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_lock = threading.Lock()
        self.bank: CaptionBank | None = None
        self.bank_status = "none" if settings.caption_bank == "none" else "loading"
        if settings.caption_bank != "none":
            threading.Thread(target=self._load_bank, name="caption-bank", daemon=True).start()

    def _load_bank(self) -> None:
        """Load (or embed once and cache) the caption bank ``/describe`` draws from."""
        s = self.settings
        try:
            if s.caption_bank == "training":
                texts, name = training_captions(s.flickr8k_dir, SAMPLE_CAPTIONS)
            else:
                texts, name = captions_from(Path(s.caption_bank))
            self.bank_status = f"embedding {name} ({len(texts)} captions)"
            parser = Parser(s.parser_dir, s.cache_dir, use_cache=True)
            self.bank = CaptionBank.load_or_build(
                name, texts, self.model, parser, self.identity, s.cache_dir, s.bank_parse_workers
            )
            self.bank_status = f"{name} ({len(self.bank)} captions)"
        except Exception as exc:  # the gallery's captions still answer /describe
            self.bank_status = f"failed: {exc}"
            log.exception("could not load the caption bank")

    def _load_decoder(self) -> tuple[CaptionDecoder | None, str]:
        """The caption decoder and a line for ``/ready``. The shipped decoder is skipped
        (not an error) when another checkpoint is served; a decoder file named in the
        settings must match, or the server does not start."""
        s = self.settings
        if s.decoder == "none":
            return None, "none"
        path = s.default_decoder if s.decoder == "default" else Path(s.decoder)
        if s.decoder == "default" and not path.exists():
            return None, "none (no shipped decoder)"
        try:
            decoder = load_decoder(path, self.identity)
        except DecoderError as exc:
            if s.decoder != "default":
                raise
            log.warning("caption decoder off: %s", exc)
            return None, "off: the shipped decoder was trained on another checkpoint"
        return decoder, f"{path.name} (beam {s.decoder_beam})"

    def _warm_up(self) -> None:
        """Load the stanza pipeline and the ensemble members now, not on a first request."""
        self.model.embed_sentences(self.batcher.parse(["A dog runs on the beach ."]))
        vec = self.model.embed_images(self.extractor.embed_images([Image.new("RGB", (64, 64))]))
        if self.decoder is not None:
            self.decoder.generate(vec, beam=1, max_len=3)

    def close(self) -> None:
        """Stop the parser threads (and processes) and close the gallery."""
        self.batcher.close()
        self.gallery.close()

    # --- facts ----------------------------------------------------------------------------

    @property
    def encoder(self) -> str:
        return self.model.encoder

    def counts(self) -> dict[str, int]:
        return self.gallery.counts()

    @contextmanager
    def _stage(self, name: str, timings: Timings) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - start
            timings[name] = timings.get(name, 0.0) + 1000 * seconds
            self.observe(name, seconds)

    # --- text -----------------------------------------------------------------------------

    def _check_text(self, text: str, what: str) -> str:
        """The cleaned text; UnusableText when it has no letter or digit (nothing to parse)."""
        if len(text) > self.settings.max_text_chars:
            raise QueryError(
                f"{what} is {len(text)} characters long; the limit is "
                f"{self.settings.max_text_chars}"
            )
        try:
            cleaned = clean_text(text, self.settings.max_text_chars)
        except ParseError:
            raise UnusableText(what) from None
        if not any(c.isalnum() for c in cleaned):
            raise UnusableText(what)
        return cleaned

    def _parse(
        self, texts: Sequence[str], whats: Sequence[str], timings: Timings
    ) -> list[DependencyTree]:
        """Trees of ``texts`` (each labelled by ``whats`` in errors), each with a known word."""
        cleaned = [self._check_text(t, w) for t, w in zip(texts, whats, strict=True)]
        with self._stage("parse", timings):
            try:  # batched with the texts of the requests waiting beside it
                trees = self.batcher.parse(cleaned)
            except ParseError as exc:
                raise QueryError(f"{whats[0] if len(whats) == 1 else 'text'}: {exc}") from None
        for tree, what in zip(trees, whats, strict=True):
            try:
                self.model.require_known_words([tree], what)
            except NoKnownWordError:
                raise UnusableText(what) from None
        return trees

    def is_cached(self, text: str) -> bool:
        """Whether the vector of ``text`` is in the query cache (no parse needed). Called
        on the event loop: no lock (one dict lookup is atomic), so the loop never waits
        for a thread that holds the cache's lock."""
        try:
            key = clean_text(text, self.settings.max_text_chars)
        except ParseError:
            return False
        return key in self._queries

    def embed_text(self, text: str, timings: Timings, what: str = "text") -> np.ndarray:
        """The unit query vector of ``text`` (cached by its cleaned form)."""
        key = self._check_text(text, what)
        with self._query_lock:
            cached = self._queries.get(key)
            if cached is not None:
                self._queries.move_to_end(key)
                return cached
        tree = self._parse([key], [what], timings)[0]
        with self._stage("encode", timings):
            vec = self.model.embed_sentences([tree])[0]
        if self.settings.query_cache:
            with self._query_lock:
                self._queries[key] = vec
                while len(self._queries) > self.settings.query_cache:
                    self._queries.popitem(last=False)
        return vec

    # --- images ---------------------------------------------------------------------------

    @property
    def min_side(self) -> int:
        """The shorter side photos are resized to for the backbone (decode no larger)."""
        return self.extractor.spec.resize

    def embed_photo(self, image: Image.Image, timings: Timings) -> np.ndarray:
        with self._stage("cnn", timings):
            features = self.extractor.embed_images([image])
        with self._stage("encode", timings):
            return self.model.embed_images(features)[0]

    def photo_path(self, image_id: int) -> Path:
        """The file of a gallery photo (UnknownItemError if the item or file is gone)."""
        return self.gallery.photo_path(image_id)

    # --- queries --------------------------------------------------------------------------

    def _search_images(self, query: np.ndarray, k: int, timings: Timings) -> ImageHits:
        with self._stage("search", timings):
            return self.gallery.search_images(query, k)

    def search(self, text: str, k: int) -> tuple[ImageHits, Timings]:
        timings: Timings = {}
        vec = self.embed_text(text, timings, "text")
        return self._search_images(vec, k, timings), timings

    @property
    def concept_weight(self) -> float:
        """The open-vocabulary channel's weight in the served model (0: none)."""
        channel = getattr(self.model, "concepts", None)
        return channel.config.weight if channel is not None else 0.0

    def require_decoder(self) -> CaptionDecoder:
        """The caption decoder; NoDecoder (501) if the server has none."""
        if self.decoder is None:
            raise NoDecoder(
                f"this server writes no sentences (caption decoder: {self.decoder_status})"
            )
        return self.decoder

    def write(self, vec: np.ndarray, timings: Timings, beam: int | None = None) -> list[Generated]:
        """Sentences the decoder writes for a joint-space vector, best first (NoDecoder
        if the server has none)."""
        decoder = self.require_decoder()
        with self._stage("generate", timings):
            beams = decoder.generate(vec[None], beam=beam or self.settings.decoder_beam)
        if self.settings.decoder_rerank and beams[0]:
            with self._stage("rerank", timings):
                beams = rerank(vec[None], beams, self._embed_written)
        return beams[0]

    def _embed_written(self, texts: list[str]) -> np.ndarray:
        return self.model.embed_sentences(self.batcher.parse(texts))

    def describe(
        self,
        image: Image.Image,
        k: int,
        retrieved: bool = True,
        written: bool = False,
        beam: int | None = None,
    ) -> tuple[list[Description], list[Generated], Timings]:
        """The ``k`` best captions for a photo among the gallery's and the bank's (one
        text once, the gallery's first) if ``retrieved``, and the sentences the decoder
        writes for it (beam ``beam``) if ``written``."""
        timings: Timings = {}
        vec = self.embed_photo(image, timings)
        sentences = self.write(vec, timings, beam) if written else []
        if not retrieved:
            return [], sentences, timings
        with self._stage("search", timings):
            found = [
                Description(r.text, score, "gallery", r.id, r.image_id)
                for r, score in self.gallery.search_captions(vec, k)
            ]
            if self.bank is not None:
                found += [Description(t, score, "bank") for t, score in self.bank.search(vec, k)]
        found.sort(key=lambda d: (-d.score, d.source != "gallery"))
        unique: dict[str, Description] = {}
        for d in found:
            unique.setdefault(d.text, d)
        return list(unique.values())[:k], sentences, timings

    def paraphrase(self, text: str, beam: int | None = None) -> tuple[list[Generated], Timings]:
        """Sentences the decoder writes for the vector of ``text``."""
        timings: Timings = {}
        self.require_decoder()  # before the parse: refuse at once
        vec = self.embed_text(text, timings, "text")
        return self.write(vec, timings, beam), timings

    def similar(self, image_id: int, k: int) -> ImageHits:
        return self.gallery.similar_images(image_id, k)

    def arithmetic(
        self,
        base: int | Image.Image,
        plus: Sequence[str],
        minus: Sequence[str],
        k: int,
        rerank: bool,
        rerank_top: int = 5,
        written: bool = False,
    ) -> tuple[ImageHits, list[Generated], Timings]:
        """Images near ``base − Σ minus + Σ plus`` (Kiros et al. 2014). With ``rerank``, a
        wider candidate list is re-sorted by its similarity to the mean of its top
        ``rerank_top`` photos, which pulls the answer toward what those photos share.
        With ``written``, also the sentences the decoder writes for the result vector."""
        timings: Timings = {}
        if isinstance(base, int):
            start = self.gallery.image_vector(base)
        else:
            start = self.embed_photo(base, timings)
        added = [self.embed_text(p, timings, f"plus phrase {i + 1}") for i, p in enumerate(plus)]
        taken = [self.embed_text(p, timings, f"minus phrase {i + 1}") for i, p in enumerate(minus)]
        query = arithmetic_query(start, added, taken, getattr(self.model, "channel_columns", 0))
        exclude = {base} if isinstance(base, int) else set()
        fetch = k + len(exclude) + (max(4 * k, 50) if rerank else 0)
        hits = [h for h in self._search_images(query, fetch, timings) if h[0].id not in exclude]
        sentences = self.write(query, timings) if written else []
        if rerank and hits:
            with self._stage("rerank", timings):
                vectors = np.stack([self.gallery.image_vector(r.id) for r, _ in hits])
                order, scores = centre_rerank(vectors, rerank_top)
                hits = [(hits[i][0], float(s)) for i, s in zip(order, scores, strict=True)]
        return hits[:k], sentences, timings

    def explain(self, text: str) -> tuple[DependencyTree, list[float] | None, Timings]:
        """The query's tree and each node's share of its vector (None if the encoder
        has no such decomposition)."""
        timings: Timings = {}
        tree = self._parse([text], ["text"], timings)[0]
        with self._stage("encode", timings):
            shares = self.model.shares(tree)
        return tree, shares, timings

    # --- writes ---------------------------------------------------------------------------

    def add_photo(
        self, data: bytes, fmt: str, image: Image.Image, captions: Sequence[str]
    ) -> tuple[int, list[int], bool]:
        """Embed an uploaded photo (and its captions) and add it to the gallery; every
        caption is checked before anything changes. Returns the image id, the new
        caption ids and whether the photo was new (same bytes: stored once)."""
        timings: Timings = {}
        whats = [
            f"caption {i + 1}" if len(captions) > 1 else "caption" for i in range(len(captions))
        ]
        trees = self._parse(list(captions), whats, timings) if captions else []
        image_vec = self.embed_photo(image, timings)
        caption_vecs = self.model.embed_sentences(trees) if trees else None
        return self.gallery.add_photo(
            data, EXTENSIONS[fmt], image_vec, [t.text for t in trees], caption_vecs
        )

    def remove_photo(self, image_id: int) -> int:
        """Remove a photo and its captions from the gallery; returns the captions removed."""
        return self.gallery.remove_photo(image_id)
