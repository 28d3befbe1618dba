"""Folders that stay indexed: a real watcher (``FolderWatcher`` over inotify) in a thread,
real photo files changed in a temp folder, the gallery read as it follows.

Waits are bounded polls of the gallery (``wait_for``), never timed assertions."""

from __future__ import annotations

import io
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from groundsearch.common.settings import get_settings
from groundsearch.index.ingest.indexer import Indexer
from groundsearch.index.ingest.indexing_runs import IndexedFiles
from groundsearch.index.ingest.watcher import FolderWatcher, folder_identity
from tests.index.synthetic import search_images

FLICKR = get_settings().flickr8k_dir
CHECKPOINT = get_settings().default_checkpoint
#: The longest any change may take to show (a bound on the polls, not a target).
WAIT_S = 90.0


def flickr_photos(n: int, start: int = 0) -> list[Path]:
    names = sorted((FLICKR / "Flickr_8k.testImages.txt").read_text().split())[start : start + n]
    return [FLICKR / "Images" / name for name in names]


def made_photo(i: int) -> bytes:
    """A small JPEG of its own (distinct content for each ``i``)."""
    rng = np.random.default_rng(i)
    pixels = rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)
    img = Image.fromarray(pixels).resize((96, 72), Image.Resampling.BILINEAR)
    out = io.BytesIO()
    img.save(out, "JPEG", quality=90)
    return out.getvalue()


def wait_for(what: str, check: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.05)


class Watching:
    """A ``FolderWatcher`` running in a thread over a real ``Indexer`` (CNN in-process)."""

    def __init__(self, indexer: Indexer) -> None:
        self.indexer = indexer
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.stop = threading.Event()
        self.watcher = FolderWatcher(indexer, on_event=self._event)
        self.thread = threading.Thread(target=self.watcher.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        self.events.append((kind, data))

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]

    def count(self, kind: str) -> int:
        return self.kinds().count(kind)

    def files(self) -> dict[str, int]:
        """Indexed file (relative to the first watched folder when under it) → photo id."""
        root = self.indexer.roots[0]
        out = {}
        for path, photo in IndexedFiles(self.indexer.gallery).files().items():
            p = Path(path)
            out[p.relative_to(root).as_posix() if p.is_relative_to(root) else path] = photo
        return out

    def searchable(self, photo_id: int) -> bool:
        """Whether the photo is in the search index (found by its own vector)."""
        gallery = self.indexer.gallery
        hits = search_images(gallery, gallery.image_vector(photo_id), 1)
        return bool(hits) and hits[0].id == photo_id

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), "the watcher did not stop"


@pytest.fixture
def watching(tmp_path: Path, parser) -> Iterator[Callable[..., Watching]]:
    started: list[tuple[Indexer, Watching]] = []

    def start(*folders: Path) -> Watching:
        indexer = Indexer(list(folders), tmp_path / "gallery", CHECKPOINT, parser, workers=0)
        indexer.__enter__()
        running = Watching(indexer)
        started.append((indexer, running))
        wait_for("the first full pass", lambda: "caught-up" in running.kinds())
        return running

    yield start
    for indexer, running in started:
        running.close()
        indexer.close()


def write(path: Path, data: bytes) -> None:
    """Land a file whole (written beside it under a hidden name, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name("." + path.name + ".part")
    temp.write_bytes(data)
    os.replace(temp, path)


def test_created_changed_renamed_moved_and_deleted_photos_are_followed(tmp_path, watching):
    root = tmp_path / "photos"
    real = flickr_photos(4)
    write(root / "a.jpg", real[0].read_bytes())
    w = watching(root)
    assert set(w.files()) == {"a.jpg"}  # the full pass at the start

    write(root / "b.jpg", real[1].read_bytes())  # created
    wait_for("b.jpg indexed", lambda: "b.jpg" in w.files())
    first = w.files()["b.jpg"]
    wait_for("b.jpg searchable", lambda: w.searchable(first))

    Image.open(real[1]).rotate(90).save(root / "b.jpg")  # changed in place: a new photo
    wait_for("b.jpg re-embedded", lambda: w.files().get("b.jpg", first) != first)
    changed = w.files()["b.jpg"]
    assert first not in w.indexer.gallery.image_ids()  # the old content had no other file
    # the file table commits before the search index refreshes: searchable within a moment
    wait_for("the changed b.jpg searchable", lambda: w.searchable(changed))

    os.rename(root / "b.jpg", root / "c.jpg")  # renamed: the same photo, not embedded again
    wait_for("the rename", lambda: set(w.files()) == {"a.jpg", "c.jpg"})
    assert w.files()["c.jpg"] == changed
    (root / "trip").mkdir()
    os.rename(root / "c.jpg", root / "trip" / "c.jpg")  # moved into a new folder
    wait_for("the move", lambda: set(w.files()) == {"a.jpg", "trip/c.jpg"})
    assert w.files()["trip/c.jpg"] == changed

    elsewhere = tmp_path / "elsewhere"
    shutil.move(root / "trip", elsewhere)  # a folder moved out: its photos go
    wait_for("the folder moved out", lambda: set(w.files()) == {"a.jpg"})
    assert changed not in w.indexer.gallery.image_ids()
    shutil.move(elsewhere, root / "trip2")  # and back in under another name: walked
    wait_for("the folder moved in", lambda: set(w.files()) == {"a.jpg", "trip2/c.jpg"})

    a = w.files()["a.jpg"]
    os.unlink(root / "a.jpg")  # deleted
    wait_for("the deletion", lambda: set(w.files()) == {"trip2/c.jpg"})
    assert a not in w.indexer.gallery.image_ids()

    (root / ".hidden.jpg").write_bytes(real[2].read_bytes())  # hidden: left out, as by a walk
    write(root / "notes.txt", b"not a photo")  # named in the batch's report, not indexed
    write(root / "d.jpg", real[3].read_bytes())
    wait_for("d.jpg indexed", lambda: "d.jpg" in w.files())
    assert set(w.files()) == {"trip2/c.jpg", "d.jpg"}

    # the file table commits before the pass returns and reports: wait for its report
    def skipped() -> list[dict[str, int]]:
        return [d["skipped"] for k, d in list(w.events) if k == "changes" and d["skipped"]]

    wait_for("notes.txt reported", lambda: {"not-an-image": 1} in skipped())
    assert w.indexer.gallery.counts()["images"] == 2

    # an iPhone's format, written by pillow-heif, dropped in: indexed and searchable
    Image.open(real[2]).convert("RGB").save(root / "e.heic", format="HEIF", quality=80)
    wait_for("e.heic indexed", lambda: "e.heic" in w.files())
    wait_for("e.heic searchable", lambda: w.searchable(w.files()["e.heic"]))


def test_a_burst_of_files_is_handled_in_batches_searchable_as_they_commit(tmp_path, watching):
    """300 files land at once: 75 photos, each in four folders too (a library with
    copies: the CNN runs once per content, so the test stays short on two cores)."""
    root = tmp_path / "photos"
    root.mkdir()
    w = watching(root)
    n, distinct = 300, 75
    seen: list[int] = []  # file counts a reader saw while the burst was handled
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(len(w.files()))
            time.sleep(0.02)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    for i in range(n):
        write(root / f"copy{i // distinct}" / f"{i:04d}.jpg", made_photo(i % distinct))
    wait_for(f"{n} files indexed", lambda: len(w.files()) == n, timeout=300)
    done.set()
    reader.join()

    assert w.indexer.gallery.counts()["images"] == distinct

    def batches() -> list[dict[str, Any]]:
        return [d for k, d in list(w.events) if k == "changes"]

    # a batch's files commit before its pass returns and reports: wait for the reports
    wait_for(
        "every batch reported",
        lambda: sum(d["photos_embedded"] + d["duplicates"] for d in batches()) >= n,
    )
    assert sum(d["photos_embedded"] for d in batches()) == distinct
    assert sum(d["duplicates"] for d in batches()) == n - distinct
    # searchable before the burst was done: committed batch by batch, not at the end
    assert any(0 < c < n for c in seen), sorted(set(seen))
    files = w.files()
    assert len(set(files.values())) == distinct
    assert files["copy0/0000.jpg"] == files["copy3/0225.jpg"]  # one photo, four files
    assert all(w.searchable(i) for i in set(files.values()))


def test_a_folder_that_disappears_keeps_its_photos_until_it_comes_back(tmp_path, watching):
    root = tmp_path / "photos"
    real = flickr_photos(3, start=10)
    for i, photo in enumerate(real):
        write(root / f"{i}.jpg", photo.read_bytes())
    w = watching(root)
    assert len(w.files()) == 3

    shutil.rmtree(root)  # deleted (as an unmounted drive's folder can be): nothing forgotten
    # (the batch of deletions was handled, all kept, before the watch saw its folder gone)
    wait_for("the folder noticed missing", lambda: "missing" in w.kinds())
    handled = len(w.events)
    assert set(w.files()) == {"0.jpg", "1.jpg", "2.jpg"}
    assert all(w.searchable(i) for i in w.files().values())

    root.mkdir()  # back, with two of its photos: caught up, the third forgotten
    for i in (0, 2):
        write(root / f"{i}.jpg", real[i].read_bytes())
    wait_for("the folder noticed back", lambda: "back" in w.kinds())
    wait_for("a full pass over it", lambda: w.kinds()[handled:].count("caught-up") >= 1)
    wait_for("the third forgotten", lambda: set(w.files()) == {"0.jpg", "2.jpg"})

    # back empty (a mount point without its drive): its photos are kept…
    shutil.rmtree(root)
    wait_for("missing again", lambda: w.count("missing") == 2)
    root.mkdir()
    wait_for("the empty folder kept", lambda: "kept" in w.kinds())
    assert set(w.files()) == {"0.jpg", "2.jpg"}
    # … until something lands in it: then it is walked whole, and the rest forgotten
    write(root / "new.jpg", real[1].read_bytes())
    wait_for("only new.jpg", lambda: set(w.files()) == {"new.jpg"})
    assert w.indexer.gallery.counts()["images"] == 1


def test_a_folder_emptied_while_nobody_watched_is_kept(tmp_path, watching, parser):
    root = tmp_path / "photos"
    write(root / "a.jpg", flickr_photos(1, start=20)[0].read_bytes())
    with Indexer([root], tmp_path / "gallery", CHECKPOINT, parser, workers=0) as indexer:
        indexer.index()
    os.unlink(root / "a.jpg")  # an unmounted drive's mount point looks like this
    w = watching(root)
    assert set(w.files()) == {"a.jpg"} and "kept" in w.kinds()


def test_folder_identity_tells_a_replaced_folder(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    before = folder_identity(folder)
    assert before is not None and folder_identity(tmp_path / "none") is None
    (tmp_path / "file").write_text("x")
    assert folder_identity(tmp_path / "file") is None
    folder.rename(tmp_path / "old")  # the old inode lives on: it cannot be reused
    folder.mkdir()
    assert folder_identity(folder) not in (None, before)
