"""The search engine behind the routes: parse → encode → search, and gallery writes.

One ``Engine`` holds what is loaded once at startup — the checkpoint, the parser, the
image backbone and the gallery — and does the blocking work (the routes call it from
worker threads). Every stage is timed (``timings`` in answers, ``observe`` for metrics).

Writes are serialised by one lock and persisted at once. They are ordered so that a
crash between the two store saves never leaves a caption pointing at a missing photo:
an upload saves the photo file, then the image store, then the caption store; a removal
saves the caption store first.
"""

from __future__ import annotations

import hashlib
import mimetypes
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from groundsearch.files import atomic_path
from index.gallery import CAPTIONS, IMAGES, Gallery, checkpoint_identity, load_gallery
from index.store import SearchHit, UnknownItemError
from model.checkpoints import load_checkpoint
from model.data.flickr import IMAGES_DIR
from model.images.features import FeatureExtractor
from model.parsing import ParseError, Parser
from model.parsing.parser import clean_text
from model.parsing.tree import DependencyTree
from model.text.vocab import NoKnownWordError
from service.batching import ParseBatcher
from service.explain import node_shares, supports_shares
from service.settings import ServiceSettings
from service.uploads import EXTENSIONS

UPLOADS = "uploads"
UPLOAD_SOURCE = "upload"

Timings = dict[str, float]


class QueryError(ValueError):
    """A text the model cannot embed (empty, too long, no known word): HTTP 422."""


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
        self.parser = parser or Parser(cache_dir=settings.cache_dir, use_cache=False)
        checkpoint = settings.checkpoint_path
        self.model = load_checkpoint(checkpoint, parser=self.parser.version)
        self.identity = checkpoint_identity(checkpoint)
        self.extractor = FeatureExtractor.for_identity(self.model.backbone)
        self.index_dir = settings.index_path
        self.gallery: Gallery = load_gallery(self.index_dir, self.identity)
        self.batcher = ParseBatcher(self.parser, workers=settings.parse_workers)
        self._warm_up()
        self._queries: OrderedDict[str, tuple[np.ndarray, DependencyTree]] = OrderedDict()
        self._query_lock = threading.Lock()
        self._write_lock = threading.Lock()

    def _warm_up(self) -> None:
        """Load the stanza pipeline and the ensemble members now, not on a first request."""
        self.model.embed_sentences(self.batcher.parse(["A dog runs on the beach ."]))
        self.model.embed_images(self.extractor.embed_images([Image.new("RGB", (64, 64))]))

    def close(self) -> None:
        """Stop the parser threads (and processes)."""
        self.batcher.close()

    # --- facts ----------------------------------------------------------------------------

    @property
    def encoder(self) -> str:
        return str(getattr(self.model, "encoder", self.model.kind))

    def counts(self) -> dict[str, int]:
        return {"images": len(self.gallery.images), "captions": len(self.gallery.captions)}

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
        try:
            return clean_text(text, self.settings.max_text_chars)
        except ParseError as exc:
            raise QueryError(f"{what}: {exc}") from None

    def _parse(self, texts: Sequence[str], what: str, timings: Timings) -> list[DependencyTree]:
        cleaned = [self._check_text(t, what) for t in texts]
        with self._stage("parse", timings):
            try:  # batched with the texts of the requests waiting beside it
                trees = self.batcher.parse(cleaned)
            except ParseError as exc:
                raise QueryError(f"{what}: {exc}") from None
        require = getattr(self.model, "require_known_words", None)  # kCCA has none
        if require is not None:
            try:
                require(trees, what)
            except NoKnownWordError as exc:
                raise QueryError(str(exc)) from None
        return trees

    def embed_text(self, text: str, timings: Timings, what: str = "text") -> np.ndarray:
        """The unit query vector of ``text`` (cached by its cleaned form)."""
        key = self._check_text(text, what)
        with self._query_lock:
            cached = self._queries.get(key)
            if cached is not None:
                self._queries.move_to_end(key)
                return cached[0]
        tree = self._parse([key], what, timings)[0]
        with self._stage("encode", timings):
            vec = self.model.embed_sentences([tree])[0]
        if self.settings.query_cache:
            with self._query_lock:
                self._queries[key] = (vec, tree)
                while len(self._queries) > self.settings.query_cache:
                    self._queries.popitem(last=False)
        return vec

    # --- images ---------------------------------------------------------------------------

    def embed_photo(self, image: Image.Image, timings: Timings) -> np.ndarray:
        with self._stage("cnn", timings):
            features = self.extractor.embed_images([image])
        with self._stage("encode", timings):
            return self.model.embed_images(features)[0]

    def photo_path(self, image_id: int) -> tuple[Path, str]:
        """The file of a gallery photo and its content type (UnknownItemError if none)."""
        meta = self.gallery.images.get(image_id)
        if meta.get("source") == UPLOAD_SOURCE:
            path = self.index_dir / meta["file"]
        else:
            path = Path(meta["source"]) / IMAGES_DIR / meta["file"]
        if not path.is_file():
            raise UnknownItemError(f"the photo of image {image_id} is no longer on disk")
        return path, mimetypes.guess_type(path.name)[0] or "application/octet-stream"

    # --- queries --------------------------------------------------------------------------

    def _search_images(self, query: np.ndarray, k: int, timings: Timings) -> list[SearchHit]:
        with self._stage("search", timings):
            return self.gallery.images.search(query[None, :], k)[0]

    def search(self, text: str, k: int) -> tuple[list[SearchHit], Timings]:
        timings: Timings = {}
        vec = self.embed_text(text, timings, "text")
        return self._search_images(vec, k, timings), timings

    def describe(self, image: Image.Image, k: int) -> tuple[list[SearchHit], Timings]:
        timings: Timings = {}
        vec = self.embed_photo(image, timings)
        with self._stage("search", timings):
            hits = self.gallery.captions.search(vec[None, :], k)[0]
        return hits, timings

    def similar(self, image_id: int, k: int) -> list[SearchHit]:
        vec = self.gallery.images.vector(image_id)
        hits = self.gallery.images.search(vec[None, :], k + 1)[0]
        return [h for h in hits if h[0] != image_id][:k]

    def arithmetic(
        self,
        base: int | Image.Image,
        plus: Sequence[str],
        minus: Sequence[str],
        k: int,
        rerank: bool,
        rerank_top: int = 5,
    ) -> tuple[list[SearchHit], Timings]:
        """Images near ``base − Σ minus + Σ plus`` (Kiros et al. 2014). With ``rerank``, a
        wider candidate list is re-sorted by its similarity to the mean of its top
        ``rerank_top`` photos, which pulls the answer toward what those photos share."""
        timings: Timings = {}
        if isinstance(base, int):
            query = self.gallery.images.vector(base).copy()
        else:
            query = self.embed_photo(base, timings)
        for phrase in plus:
            query = query + self.embed_text(phrase, timings, f"plus phrase {phrase!r}")
        for phrase in minus:
            query = query - self.embed_text(phrase, timings, f"minus phrase {phrase!r}")
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        exclude = {base} if isinstance(base, int) else set()
        fetch = k + len(exclude) + (max(4 * k, 50) if rerank else 0)
        hits = [h for h in self._search_images(query, fetch, timings) if h[0] not in exclude]
        if rerank and hits:
            with self._stage("rerank", timings):
                vectors = np.stack([self.gallery.images.vector(h[0]) for h in hits])
                centre = vectors[:rerank_top].mean(axis=0)
                scores = vectors @ centre / max(float(np.linalg.norm(centre)), 1e-12)
                order = np.argsort(-scores, kind="stable")
                hits = [(hits[i][0], float(scores[i]), hits[i][2]) for i in order]
        return hits[:k], timings

    def explain(self, text: str) -> tuple[DependencyTree, list[float] | None, Timings]:
        """The query's tree and each node's share of its vector (None if the encoder
        has no such decomposition)."""
        timings: Timings = {}
        tree = self._parse([text], "text", timings)[0]
        joint = getattr(self.model, "model", None)
        shares = None
        if joint is not None and supports_shares(joint):
            with self._stage("encode", timings):
                shares = node_shares(joint, tree)
        return tree, shares, timings

    # --- writes ---------------------------------------------------------------------------

    def add_photo(
        self, data: bytes, fmt: str, image: Image.Image, captions: Sequence[str]
    ) -> tuple[int, list[int]]:
        """Add an uploaded photo (and its captions) to the gallery and persist it."""
        timings: Timings = {}
        trees = (
            self._parse(list(captions), "caption", timings) if captions else []
        )  # every caption checked before anything changes
        image_vec = self.embed_photo(image, timings)
        caption_vecs = self.model.embed_sentences(trees) if trees else None
        name = f"{hashlib.sha256(data).hexdigest()[:20]}.{EXTENSIONS[fmt]}"
        texts = [t.text for t in trees]
        with self._write_lock:
            path = self.index_dir / UPLOADS / name
            if not path.exists():
                with atomic_path(path) as tmp, open(tmp, "wb") as fh:
                    fh.write(data)
            file = f"{UPLOADS}/{name}"
            meta: dict[str, Any] = {"file": file, "captions": texts, "source": UPLOAD_SOURCE}
            image_id = self.gallery.images.add(image_vec[None, :], [meta])[0]
            self.gallery.images.save(self.index_dir / IMAGES)
            caption_ids: list[int] = []
            if caption_vecs is not None:
                caption_ids = self.gallery.captions.add(
                    caption_vecs,
                    [{"text": t, "image": file, "image_id": image_id} for t in texts],
                )
                self.gallery.captions.save(self.index_dir / CAPTIONS)
        return image_id, caption_ids

    def remove_photo(self, image_id: int) -> int:
        """Remove a photo and its captions from the gallery; returns the captions removed."""
        with self._write_lock:
            meta = self.gallery.images.get(image_id)
            captions = self.gallery.captions
            doomed = [i for i in captions.ids if captions.get(i).get("image_id") == image_id]
            for i in doomed:
                captions.remove(i)
            if doomed:
                captions.save(self.index_dir / CAPTIONS)
            self.gallery.images.remove(image_id)
            self.gallery.images.save(self.index_dir / IMAGES)
            if meta.get("source") == UPLOAD_SOURCE:
                still_used = any(
                    self.gallery.images.get(i).get("file") == meta["file"]
                    for i in self.gallery.images.ids
                )
                if not still_used:
                    (self.index_dir / meta["file"]).unlink(missing_ok=True)
        return len(doomed)
