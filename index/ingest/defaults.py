"""The gallery ``groundsearch serve`` starts with when its index folder is empty, and
the presets of ``groundsearch index``: Flickr8k's test split and the sample photos, both
indexed by ``index_photos``. An existing gallery is kept (refused if another checkpoint
built it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from groundsearch.index.gallery import Gallery, is_gallery
from groundsearch.index.ingest.indexer import IndexReport, image_dim, index_photos
from groundsearch.index.ingest.indexing_runs import IndexedFiles
from groundsearch.index.ingest.sample_gallery import SAMPLE_DATA, prepare_sample_dataset
from groundsearch.model.data.flickr import CAPTIONS_FILE, FLICKR8K_SPLITS, IMAGES_DIR
from groundsearch.model.runtime.checkpoints import checkpoint_identity, load_checkpoint
from groundsearch.model.runtime.objects.detector import ObjectDetector
from groundsearch.model.runtime.parsing import Parser


@dataclass(frozen=True)
class Preset:
    """What ``groundsearch index`` indexes for a named collection."""

    paths: list[Path]
    captions: Path | None
    only: set[str] | None
    what: str


def has_flickr8k(root: Path) -> bool:
    """Whether ``root`` holds Flickr8k (its captions file)."""
    return (Path(root) / CAPTIONS_FILE).is_file()


def read_list(path: Path) -> set[str]:
    """A list of photo names, one a line (e.g. a Flickr8k split file)."""
    return {line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line}


def flickr8k_preset(root: Path, split: str | None = "test") -> Preset:
    """Flickr8k (or a folder in its layout): its photos, captions file and split list."""
    only = None
    if split:
        only = read_list(root / FLICKR8K_SPLITS.get(split, split))
    what = f"the Flickr8k {split} split" if split else "Flickr8k"
    return Preset([root / IMAGES_DIR], root / CAPTIONS_FILE, only, what)


def sample_preset(cache_dir: Path) -> Preset:
    """The shipped sample photos, prepared under ``cache_dir`` (nothing downloaded)."""
    root = prepare_sample_dataset(cache_dir / SAMPLE_DATA)
    return Preset([root / IMAGES_DIR], root / CAPTIONS_FILE, None, "the shipped sample gallery")


def index_preset(
    preset: Preset,
    folder: Path,
    checkpoint: Path,
    parser: Parser,
    progress: bool = False,
    detector: ObjectDetector | None = None,
) -> IndexReport:
    return index_photos(
        preset.paths,
        folder,
        checkpoint,
        parser,
        preset.captions,
        preset.only,
        progress=progress,
        detector=detector,
    )


def ensure_gallery(
    checkpoint: Path,
    folder: Path,
    parser: Parser,
    cache_dir: Path,
    flickr8k: Path | None,
    sample: bool = False,
    empty: bool = False,
    detector: ObjectDetector | None = None,
) -> str:
    """Index the default collection into ``folder`` if it has no gallery (``flickr8k`` when
    there, else or with ``sample`` the sample photos; ``empty``: an empty gallery) and say
    what is served. ``StoreError`` (``IdentityMismatch``) for another checkpoint's."""
    if is_gallery(folder):
        gallery = Gallery.open(folder, checkpoint_identity(checkpoint))
        try:
            if IndexedFiles(gallery).has_files_under(cache_dir / SAMPLE_DATA):  # a cleared cache
                prepare_sample_dataset(cache_dir / SAMPLE_DATA)
            return f"the gallery at {folder} ({gallery.counts()['images']} photos)"
        finally:
            gallery.close()
    if empty:
        model = load_checkpoint(checkpoint, parser=parser.version)
        Gallery.create(folder, image_dim(model), checkpoint_identity(checkpoint)).close()
        return f"a new gallery at {folder}"
    if not sample and flickr8k is not None and has_flickr8k(flickr8k):
        preset = flickr8k_preset(flickr8k)
    else:
        preset = sample_preset(cache_dir)
    report = index_preset(preset, folder, checkpoint, parser, progress=True, detector=detector)
    return f"{preset.what}, indexed into {folder} ({report.photos} photos)"
