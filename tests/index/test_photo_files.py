"""Walking a user's photo folders: order, hidden and excluded entries, links, problems."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from groundsearch.index.store.photo_files import PhotoFile, Skipped, walk_photos

IMAGES = Path("/work/shared/data/flickr8k/Images")
NAMES = sorted(os.listdir(IMAGES))[:3]


def copy_photo(dest: Path, index: int = 0) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(IMAGES / NAMES[index], dest)
    return dest


def walk(*paths: Path, exclude: tuple[Path, ...] = ()) -> list[PhotoFile | Skipped]:
    return list(walk_photos(list(paths), exclude))


def files(found: list[PhotoFile | Skipped]) -> list[Path]:
    return [f.path for f in found if isinstance(f, PhotoFile)]


def test_folders_are_walked_in_name_order_with_every_regular_file(tmp_path):
    root = tmp_path / "photos"
    copy_photo(root / "b" / "2.jpg", 1)
    copy_photo(root / "a.jpg", 0)
    copy_photo(root / "b" / "1" / "deep.JPEG", 2)
    (root / "c").mkdir()
    (root / "notes.txt").write_text("not a photo, still yielded")
    found = walk(root)
    assert all(isinstance(f, PhotoFile) for f in found)
    assert files(found) == [
        root / "a.jpg",
        root / "b" / "1" / "deep.JPEG",
        root / "b" / "2.jpg",
        root / "notes.txt",
    ]
    first = found[0]
    assert isinstance(first, PhotoFile)
    st = (root / "a.jpg").stat()
    assert (first.size, first.mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert first.size == (IMAGES / NAMES[0]).stat().st_size


def test_given_paths_are_absolute_and_normalised(tmp_path, monkeypatch):
    photo = copy_photo(tmp_path / "one" / "x.jpg")
    monkeypatch.chdir(tmp_path / "one")
    assert files(walk(Path("x.jpg"), Path("../one/./x.jpg"))) == [photo, photo]


def test_hidden_entries_and_excluded_folders_are_left_out_silently(tmp_path):
    root = tmp_path / "photos"
    keep = copy_photo(root / "keep.jpg")
    copy_photo(root / ".DS_Store")
    copy_photo(root / ".thumbs" / "t.jpg")
    gallery = root / "gallery"
    copy_photo(gallery / "uploads" / "u.jpg")
    (root / "via-link").symlink_to(gallery)  # the excluded folder under another name
    assert walk(root, exclude=(gallery,)) == [
        PhotoFile(keep, keep.stat().st_size, keep.stat().st_mtime_ns)
    ]
    assert walk(gallery / "uploads" / "u.jpg", gallery, exclude=(gallery,)) == []
    # a hidden folder given explicitly is walked
    assert files(walk(root / ".thumbs")) == [root / ".thumbs" / "t.jpg"]


def test_an_excluded_folder_created_during_the_walk_is_left_out(tmp_path):
    root = tmp_path / "photos"
    copy_photo(root / "a.jpg")
    copy_photo(root / "sub" / "b.jpg")
    gallery = root / "sub" / "gallery"
    walker = walk_photos([root], [gallery])
    assert next(walker).path == root / "a.jpg"  # type: ignore[union-attr]
    copy_photo(gallery / "g.jpg")  # the gallery is written while the walk goes on
    assert files(list(walker)) == [root / "sub" / "b.jpg"]


def test_links_are_followed_without_resolving_and_a_file_twice_is_yielded_twice(tmp_path):
    real = copy_photo(tmp_path / "real" / "r.jpg")
    root = tmp_path / "photos"
    root.mkdir()
    (root / "album").symlink_to(tmp_path / "real")
    (root / "photo.jpg").symlink_to(real)
    assert files(walk(root, tmp_path / "real")) == [
        root / "album" / "r.jpg",
        root / "photo.jpg",
        real,
    ]


def test_a_symlink_loop_is_reported_once_and_the_walk_goes_on(tmp_path):
    root = tmp_path / "photos"
    copy_photo(root / "a" / "x.jpg")
    (root / "a" / "loop").symlink_to(root)
    (root / "a" / "self").symlink_to(root / "a" / "self")  # ELOOP from stat
    copy_photo(root / "b.jpg")
    found = walk(root)
    assert files(found) == [root / "a" / "x.jpg", root / "b.jpg"]
    problems = [(f.path, f.reason) for f in found if isinstance(f, Skipped)]
    assert problems == [
        (root / "a" / "loop", "symlink-loop"),
        (root / "a" / "self", "symlink-loop"),
    ]


def test_missing_paths_and_broken_links_are_skipped_with_a_message(tmp_path):
    root = tmp_path / "photos"
    copy_photo(root / "ok.jpg")
    (root / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    found = walk(tmp_path / "missing", root)
    assert [(type(f).__name__, f.path) for f in found] == [
        ("Skipped", tmp_path / "missing"),
        ("Skipped", root / "gone.jpg"),
        ("PhotoFile", root / "ok.jpg"),
    ]
    missing, broken = found[0], found[1]
    assert isinstance(missing, Skipped) and isinstance(broken, Skipped)
    assert missing.reason == "missing" and str(tmp_path / "missing") in missing.message
    assert broken.reason == "broken-link" and "gone.jpg" in broken.message
    assert walk(root / "gone.jpg")[0].reason == "broken-link"  # type: ignore[union-attr]


def test_special_files_are_not_photos(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    (found,) = walk(tmp_path)
    assert isinstance(found, Skipped) and found.reason == "not-a-file"
    assert walk(fifo) == [found]


def test_a_folder_that_cannot_be_listed_and_an_unreadable_file_are_skipped(tmp_path, monkeypatch):
    root = tmp_path / "photos"
    copy_photo(root / "a" / "x.jpg")
    copy_photo(root / "b" / "y.jpg")
    scandir = os.scandir

    def refuse(path):  # what listing a folder without read permission does
        if Path(path) == root / "a":
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: access(p, mode) and p != root / "b" / "y.jpg")
    found = walk(root)
    assert files(found) == []
    assert [(f.path, f.reason, f.message) for f in found if isinstance(f, Skipped)] == [
        (root / "a", "unreadable", f"{root / 'a'}: folder cannot be listed (Permission denied)"),
        (
            root / "b" / "y.jpg",
            "unreadable",
            f"{root / 'b' / 'y.jpg'}: cannot be read (permission denied)",
        ),
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads everything")
def test_unreadable_folders_and_files_by_permission(tmp_path):
    root = tmp_path / "photos"
    secret = copy_photo(root / "secret" / "x.jpg").parent
    locked = copy_photo(root / "locked.jpg")
    secret.chmod(0)
    locked.chmod(0)
    try:
        found = walk(root)
    finally:
        secret.chmod(0o755)
    assert [(f.path, f.reason) for f in found if isinstance(f, Skipped)] == [
        (locked, "unreadable"),
        (secret, "unreadable"),
    ]


def test_the_walk_streams(tmp_path):
    root = tmp_path / "photos"
    for i in range(3):
        copy_photo(root / f"{i}.jpg", i)
    walker = walk_photos([root])
    assert next(walker).path == root / "0.jpg"  # type: ignore[union-attr]
    (root / "2.jpg").unlink()  # gone before the walk reaches it: reported, no exception
    rest = list(walker)
    assert [(f.path.name, type(f).__name__) for f in rest] == [
        ("1.jpg", "PhotoFile"),
        ("2.jpg", "Skipped"),
    ]
    assert rest[1].reason == "missing"  # type: ignore[union-attr]
