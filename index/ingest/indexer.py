"""``groundsearch index``: photo folders (and optional captions) into a gallery.

The one way a gallery is filled. It streams: files are walked, each new or changed one
hashed and its metadata read; new content goes through the CNN in worker processes
(``FeaturePool``) or on Ray actors (``RayFeaturePool``). Photos are committed in batches
with their captions, so a killed run keeps what it committed and a re-run skips unchanged
files (size and mtime); files gone since the last run are forgotten at the end. Photos of
a migrated format-2 gallery get their metadata read without being embedded again, and one
indexed before classes were kept goes through the CNN once more for its classes alone.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from groundsearch.common.files import sha256_file
from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexing_runs import IndexedFile, IndexedFiles
from groundsearch.index.ingest.objects import detect_objects
from groundsearch.index.store.photo_files import PhotoFile, Skipped, walk_photos
from groundsearch.index.store.photo_metadata import PhotoMetadata, read_metadata
from groundsearch.model.data.caption_files import CaptionFile, read_caption_file
from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.evidence import photo_classes
from groundsearch.model.runtime.images.backbones import get_spec
from groundsearch.model.runtime.images.backend import FeatureBackend
from groundsearch.model.runtime.images.photos import MAX_PIXELS, PhotoError
from groundsearch.model.runtime.images.pool import FeaturePool
from groundsearch.model.runtime.images.ray_pool import RayFeaturePool
from groundsearch.model.runtime.objects.detector import ObjectDetector
from groundsearch.model.runtime.parsing import DependencyTree, Parser
from groundsearch.model.runtime.sentences import Sentences

#: Photos per commit (each commit is one transaction: photos with their captions).
COMMIT_EVERY = 64
#: Unchanged files marked as seen per transaction.
SEEN_EVERY = 5000


class IndexingError(ValueError):
    """A run that cannot start (the message names the problem)."""


@dataclass
class IndexReport:
    """What a run did, for the closing summary."""

    gallery: str
    found: int = 0
    unchanged: int = 0
    embedded: int = 0
    duplicates: int = 0
    captions: int = 0
    forgotten: int = 0
    replaced: int = 0
    backfilled: int = 0
    classes_backfilled: int = 0
    #: photos whose object detector scores were stored (``index.ingest.objects``)
    objects: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    caption_problems: list[str] = field(default_factory=list)
    unused_captions: int = 0
    photos: int = 0
    seconds: float = 0.0

    def summary(self) -> dict[str, object]:
        reasons = Counter(s.reason for s in self.skipped)
        return {
            "gallery": self.gallery,
            "files_found": self.found,
            "photos_embedded": self.embedded,
            "unchanged": self.unchanged,
            "duplicates": self.duplicates,
            "captions_added": self.captions,
            "photos_gone_from_disk": self.forgotten,
            "photos_replaced_by_new_content": self.replaced,
            "metadata_backfilled": self.backfilled,
            "classes_backfilled": self.classes_backfilled,
            "objects_detected": self.objects,
            "skipped": dict(sorted(reasons.items())),
            "caption_problems": len(self.caption_problems),
            "captions_for_photos_not_found": self.unused_captions,
            "gallery_photos": self.photos,
            "seconds": round(self.seconds, 1),
        }

    def lines(self, limit: int = 50) -> list[str]:
        """Human lines: every skipped file and caption problem (up to ``limit`` each)."""
        out = []
        for what, items in (
            ("skipped", [f"({s.reason}) {s.message}" for s in self.skipped]),
            ("caption problem", self.caption_problems),
        ):
            out += [f"{what}: {line}" for line in items[:limit]]
            if len(items) > limit:
                out.append(f"… and {len(items) - limit} more {what} lines")
        return out


@dataclass
class _Pending:
    """A file on its way into the gallery."""

    file: PhotoFile
    sha256: str
    captions: list[str]
    meta: PhotoMetadata | None = None


class _Run:
    """One indexing run's state (see ``index_photos``)."""

    def __init__(
        self,
        session: Indexer,
        report: IndexReport,
        tick: Callable[[int], None],
        commit_seconds: float | None,
    ) -> None:
        self.gallery, self.model, self.roots = session.gallery, session.model, session.roots
        self.caption_file, self.trees, self.only = session.caption_file, session.trees, session.only
        self.report, self.tick = report, tick
        #: commit also once this many seconds passed since the last commit (None: by count)
        self.commit_seconds = commit_seconds
        self.last_commit = time.monotonic()
        self.files = IndexedFiles(self.gallery)
        self.run = self.files.next_run()
        self.batch: list[tuple[_Pending, np.ndarray | None]] = []
        self.seen: list[str] = []
        self.backfill: list[tuple[int, PhotoMetadata]] = []  # format-2 photos read again
        self.in_flight: dict[str, list[_Pending]] = {}  # sha → duplicates waiting for it
        self.queued: set[str] = set()  # shas embedded, waiting in ``batch`` for the commit
        #: unchanged photos indexed before classes were kept, through the CNN for them
        self.wants_classes = getattr(self.model, "concepts", None) is not None
        self.for_classes: set[str] = set()

    def wanted(self, file: PhotoFile) -> bool:
        if self.only is None or file.path.name in self.only:
            return True
        return any(_relative(file.path, r) in self.only for r in self.roots)

    def captions_of(self, path: Path) -> list[str]:
        if self.caption_file is None:
            return []
        return [t for t in self.caption_file.for_photo(path, self.roots) if t in self.trees]

    def to_embed(self, found: Iterator[PhotoFile | Skipped]) -> Iterator[_Pending]:
        """The files whose content needs the CNN; everything else is settled here."""
        for item in found:
            if isinstance(item, Skipped):
                self.report.skipped.append(item)
                continue
            if not self.wanted(item):
                continue
            self.report.found += 1
            pending = self._examine(item)
            if pending is not None:
                yield pending

    def _examine(self, file: PhotoFile) -> _Pending | None:
        path = str(file.path)
        state = self.files.file_state(path)
        texts = self.captions_of(file.path)
        if state is not None and state[:2] == (file.size, file.mtime_ns):
            self.report.unchanged += 1
            meta = None if state.has_metadata else _metadata(file.path)
            sha = state.sha256
            if not state.has_classes and self.wants_classes and sha not in self.for_classes:
                self.for_classes.add(sha)  # its vector stays; the CNN pass is for its classes
                self.in_flight[sha] = []
                return _Pending(file, sha, texts, meta)
            if texts and set(texts) - {c.text for c in self.gallery.captions_of(state.photo_id)}:
                self._queue(_Pending(file, state.sha256, texts, meta), None)
            else:
                self.seen.append(path)
                if meta is not None:
                    self.backfill.append((state.photo_id, meta))
                if len(self.seen) >= SEEN_EVERY:  # bounded memory on a re-run of millions
                    self._mark_seen()
            self.tick(1)
            return None
        try:
            sha = sha256_file(file.path)
        except OSError as exc:
            self._skip(file.path, "unreadable", f"cannot read it: {exc.strerror or exc}")
            return None
        pending = _Pending(file, sha, texts, _metadata(file.path))
        if sha in self.in_flight:  # the same content is already on its way
            self.in_flight[sha].append(pending)
            self.report.duplicates += 1
            return None
        if sha in self.queued or self.files.photo_of_sha(sha) is not None:
            self.report.duplicates += 1
            self._queue(pending, None)
            self.tick(1)
            return None
        self.in_flight[sha] = []
        return pending

    def _skip(self, path: Path, reason: str, message: str) -> None:
        self.report.skipped.append(Skipped(path, reason, message))
        self.tick(1)

    def embedded(self, pending: _Pending, result: np.ndarray | PhotoError) -> None:
        """A CNN result: queue the photo (and the duplicates that waited for it)."""
        waiting = self.in_flight.pop(pending.sha256, [])
        if isinstance(result, PhotoError) and pending.sha256 in self.for_classes:
            # an unchanged photo read for its classes alone stays as it was, without them
            self.seen.append(str(pending.file.path))
            self.tick(1)
            return
        if isinstance(result, PhotoError):
            for p in [pending, *waiting]:
                self._skip(p.file.path, result.reason, str(result))
            self.report.duplicates -= len(waiting)
            return
        if pending.sha256 in self.for_classes:
            self.report.classes_backfilled += 1
        else:
            self.report.embedded += 1
        self._queue(pending, result)
        self.tick(1)
        for dup in waiting:
            self._queue(dup, None)
            self.tick(1)

    def _queue(self, pending: _Pending, features: np.ndarray | None) -> None:
        self.batch.append((pending, features))
        if features is not None:
            self.queued.add(pending.sha256)
        if len(self.batch) >= COMMIT_EVERY or (
            self.commit_seconds is not None
            and time.monotonic() - self.last_commit >= self.commit_seconds
        ):
            self.commit()

    def _mark_seen(self) -> None:
        """Record the unchanged files seen so far, and the metadata read for their photos."""
        self.report.backfilled += self.files.mark_seen(self.seen, self.run, self.backfill)
        self.seen, self.backfill = [], []

    def commit(self) -> None:
        """Embed the batch's photos and captions and record them in one transaction."""
        if self.seen:
            self._mark_seen()
        if not self.batch:
            return
        batch, self.batch = self.batch, []
        self.last_commit = time.monotonic()
        self.queued = set()
        rows = [i for i, (_, f) in enumerate(batch) if f is not None]
        vectors: dict[int, np.ndarray] = {}
        classes: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        if rows:
            features = np.stack([batch[i][1] for i in rows])  # type: ignore[misc]
            vectors = dict(zip(rows, self.model.embed_images(features), strict=True))
            seen = photo_classes(self.model, features)
            if seen is not None:
                classes = {r: (seen[0][j], seen[1][j]) for j, r in enumerate(rows)}
        texts = [t for p, _ in batch for t in p.captions]
        caption_vectors = iter(
            self.model.embed_sentences([self.trees[t] for t in texts]) if texts else []
        )
        files = []
        for i, (p, _) in enumerate(batch):
            cvecs = [next(caption_vectors) for _ in p.captions]
            caption_matrix = np.stack(cvecs) if cvecs else None
            file = (str(p.file.path), p.file.size, p.file.mtime_ns, p.sha256, vectors.get(i))
            files.append(IndexedFile(*file, p.captions, caption_matrix, p.meta, classes.get(i)))
        added = self.files.add_files(files, self.run)
        self.report.captions += added.captions
        self.report.replaced += added.replaced
        self.report.backfilled += added.filled


def _metadata(path: Path) -> PhotoMetadata | None:
    """What the file says (None if it cannot even be stat'ed: it is gone)."""
    try:
        return read_metadata(path)
    except OSError:
        return None


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return ""


def _named(key: str, only: set[str] | None) -> bool:
    """Whether a captions-file key can name a photo of a run restricted to ``only``."""
    return only is None or key in only or Path(key).name in only


def parse_captions(
    captions: CaptionFile,
    parser: Parser,
    model: Embedder,
    workers: int,
    report: IndexReport,
    only: set[str] | None = None,
) -> dict[str, DependencyTree]:
    """Trees of the file's usable captions (of the photos ``only`` names), by text; the
    others are reported with why and left out."""
    wanted = {t for key, texts in captions.captions.items() if _named(key, only) for t in texts}
    texts = sorted(wanted)
    door = Sentences(model, lambda cleaned: parser.parse(cleaned, workers=workers))
    out = {}
    for outcome in door.outcomes(texts, ["caption"] * len(texts)):
        if outcome.tree is not None:
            out[outcome.text] = outcome.tree
        else:
            report.caption_problems.append(
                f"{captions.path}: {outcome.text[:60]!r}: {outcome.error}"
            )
    return out


def count_files(
    paths: Sequence[Path], exclude: Sequence[Path], wanted: Callable[[PhotoFile], bool]
) -> int:
    """How many files a run will look at (a quick walk, for the progress bar's ETA)."""
    return sum(1 for f in walk_photos(paths, exclude) if isinstance(f, PhotoFile) and wanted(f))


class Indexer:
    """An indexing session over ``paths`` (``index_photos``'s arguments), open for several
    passes (a folder watcher's, one per batch of changes):

        with Indexer([Path("~/Photos")], gallery_dir, checkpoint, parser) as indexer:
            report = indexer.index([changed], gone=[deleted_path])

    ``model``, ``gallery``: ones already loaded; the session closes only what it opened."""

    def __init__(
        self,
        paths: Sequence[Path],
        gallery_dir: Path,
        checkpoint: Path,
        parser: Parser | None,
        captions: Path | None = None,
        only: set[str] | None = None,
        workers: int | None = None,
        kind: str = "auto",
        max_pixels: int = MAX_PIXELS,
        ray: str | None = None,
        progress: bool = False,
        model: Embedder | None = None,
        gallery: Gallery | None = None,
        detector: ObjectDetector | None = None,
    ) -> None:
        self.roots = [Path(os.path.abspath(p)) for p in paths]
        for root in self.roots:
            if not root.exists() and not root.is_symlink():
                raise IndexingError(f"{root}: no such file or folder")
        if ray is not None and workers == 0:
            raise IndexingError("with a Ray cluster, workers (actors) must be at least 1")
        if model is None and parser is None:
            raise ValueError("give the parser the checkpoint is loaded with, or the model")
        actors = workers
        workers = os.cpu_count() or 1 if workers is None else workers
        self.gallery_dir = Path(os.path.abspath(gallery_dir))
        self.only = only
        self.caption_file = read_caption_file(captions) if captions is not None else None
        self._owns_model = model is None  # a command's: its cores are the CNN's, then ours
        if model is None:
            assert parser is not None
            torch.set_num_threads(1)  # this process only projects and writes: the cores
            model = load_checkpoint(checkpoint, parser=parser.version)  # are the CNN's
        self.model = model
        #: stores each photo's object scores after a pass (None: the gallery keeps none)
        self.detector = detector
        self.pool: FeatureBackend
        if ray is None:
            self.pool = FeaturePool(model.backbone, workers, max_pixels=max_pixels)
        else:  # checked now, before the captions' parse: a bad address fails at once
            cluster = RayFeaturePool(
                model.backbone, ray, actors, max_pixels=max_pixels, progress=progress
            )
            cluster.check()
            self.pool = cluster
        try:
            #: what was wrong with the captions file and its captions
            self.caption_problems: list[str] = []
            self.trees: dict[str, DependencyTree] = {}
            if self.caption_file is not None:
                assert parser is not None
                self.caption_problems += self.caption_file.problems
                setup = IndexReport(str(self.gallery_dir))
                self.trees = parse_captions(
                    self.caption_file, parser, model, max(workers, 1), setup, only
                )
                self.caption_problems += setup.caption_problems
            self._owns_gallery = gallery is None
            if gallery is None:
                identity = checkpoint_identity(checkpoint)
                gallery = Gallery.open_or_create(self.gallery_dir, image_dim(model), identity, kind)
            self.gallery = gallery
        except BaseException:
            self.pool.close()
            raise

    def __enter__(self) -> Indexer:
        try:
            self.pool.__enter__()  # starts FeaturePool's workers; the Ray pool was checked
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the CNN workers; close the gallery if the session opened it."""
        try:
            if self._owns_gallery:
                self.gallery.close()
        finally:
            self.pool.close()

    def index(
        self,
        paths: Sequence[Path] | None = None,
        forget: Sequence[Path] | None = None,
        gone: Sequence[Path] = (),
        progress: bool = False,
        stop: Callable[[], bool] | None = None,
        keep: Callable[[Path], bool] | None = None,
        commit_seconds: float | None = None,
    ) -> IndexReport:
        """One pass: every file under ``paths`` (default: the session's) recorded, new
        content embedded; then files not seen under ``forget`` (default: the session's
        folders), and those under ``gone``, forgotten. ``stop``: asked after each photo
        (yes: commit, forget nothing); ``keep``: yes leaves a folder's files alone;
        ``commit_seconds``: also commit after this long."""
        start = time.perf_counter()
        paths = self.roots if paths is None else [Path(os.path.abspath(p)) for p in paths]
        report = IndexReport(str(self.gallery_dir))
        from tqdm import tqdm

        bar = tqdm(
            unit="photo", desc="indexing", disable=not progress, file=sys.stderr, smoothing=0.1
        )
        try:
            run = _Run(self, report, bar.update, commit_seconds)
            if progress:
                bar.total = count_files(paths, [self.gallery_dir], run.wanted)
                bar.refresh()
            stopped = False
            pending = run.to_embed(walk_photos(paths, [self.gallery_dir]))
            for item, result in self.pool.map(pending, lambda p: p.file.path):
                run.embedded(item, result)
                if stop is not None and stop():
                    stopped = True
                    break
            run.commit()
            if not stopped:  # decided now: a folder may have gone (unmounted?) meanwhile
                folders = self.roots if forget is None else forget
                folders = [f for f in folders if f.is_dir() and not (keep and keep(f))]
                report.forgotten = run.files.forget_unseen([str(f) for f in folders], run.run)
                gone = [g for g in gone if not os.path.lexists(g) and not (keep and keep(g))]
                if gone:
                    report.forgotten += run.files.forget([str(g) for g in gone])
                if self.detector is not None:
                    report.objects = detect_objects(
                        self.gallery, self.detector, progress, stop, self._owns_model
                    )
        finally:
            bar.close()
        report.photos = self.gallery.counts()["images"]
        report.seconds = time.perf_counter() - start
        return report


def index_photos(
    paths: Sequence[Path],
    gallery_dir: Path,
    checkpoint: Path,
    parser: Parser,
    captions: Path | None = None,
    only: set[str] | None = None,
    workers: int | None = None,
    kind: str = "auto",
    max_pixels: int = MAX_PIXELS,
    progress: bool = False,
    ray: str | None = None,
    detector: ObjectDetector | None = None,
) -> IndexReport:
    """Index ``paths`` (folders, recursively, and files) into the gallery at ``gallery_dir``
    (created if missing). ``captions``: a TSV or JSONL file; ``only``: these names (or
    paths relative to a folder) alone; ``workers``: CNN processes (default one per core;
    0: in this process), or Ray actors on the cluster ``ray``; ``detector``: each photo's
    object scores stored too. ``IndexingError`` for a missing path; a bad file is reported."""
    start = time.perf_counter()
    session = Indexer(
        paths,
        gallery_dir,
        checkpoint,
        parser,
        captions=captions,
        only=only,
        workers=workers,
        kind=kind,
        max_pixels=max_pixels,
        ray=ray,
        progress=progress,
        detector=detector,
    )
    with session as indexer:
        report = indexer.index(progress=progress)
        report.caption_problems[:0] = indexer.caption_problems
        report.backfilled += indexer.gallery.writes.fill_upload_metadata()
        if indexer.caption_file is not None:
            unused = indexer.caption_file.unused()
            report.unused_captions = sum(1 for k in unused if _named(k, only))
        report.photos = indexer.gallery.counts()["images"]
    report.seconds = time.perf_counter() - start
    return report


def image_dim(model: Embedder) -> int:
    """The size of the joint space ``model`` puts photos in (a gallery's ``dim``)."""
    features = np.zeros((1, get_spec(model.backbone.partition("-10crop")[0]).dim), np.float32)
    return int(model.embed_images(features).shape[1])
