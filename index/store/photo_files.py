"""The files under the paths a user asks to index, streamed in a stable order: depth
first, by name, hidden names and excluded folders left out, links followed; a
``Skipped`` for what cannot be looked at, never an exception."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PhotoFile:
    """A regular file to try as a photo: absolute path (links not resolved), size, mtime."""

    path: Path
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Skipped:
    """Something that could not be walked: ``reason`` a slug (``missing``, ``broken-link``,
    ``symlink-loop``, ``unreadable``, ``not-a-file``), ``message`` naming it."""

    path: Path
    reason: str
    message: str


_Id = tuple[int, int]


class _Excluded:
    """Excluded paths, by absolute path and by (device, inode) where they exist now."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = [Path(os.path.abspath(p)) for p in paths]
        self.names = {str(p) for p in self.paths}
        self.ids: set[_Id] = set()
        for path in self.paths:
            with contextlib.suppress(OSError):
                self.ids.add(_id(os.stat(path)))

    def covers(self, path: Path) -> bool:
        """Whether a given path is an excluded one or inside one."""
        return any(path == ex or path.is_relative_to(ex) for ex in self.paths)

    def has(self, path: str, st: os.stat_result) -> bool:
        return path in self.names or _id(st) in self.ids


def walk_photos(
    paths: Sequence[Path], exclude: Sequence[Path] = ()
) -> Iterator[PhotoFile | Skipped]:
    """Every regular file under ``paths`` (files as given, folders recursively), in order."""
    excluded = _Excluded(exclude)
    for given in paths:
        path = Path(os.path.abspath(given))
        if excluded.covers(path):
            continue
        try:
            st = os.stat(path)
        except OSError as exc:
            yield _problem(path, exc, os.path.islink(path))
            continue
        if excluded.has(str(path), st):
            continue
        if stat.S_ISDIR(st.st_mode):
            yield from _walk_folder(path, st, excluded)
        else:
            yield _file(path, st)


def _walk_folder(
    root: Path, root_st: os.stat_result, excluded: _Excluded
) -> Iterator[PhotoFile | Skipped]:
    """Depth first; a link back to a folder on the current path is a loop, reported once."""
    stack: list[tuple[_Id, Iterator[os.DirEntry[str]]]] = []
    ancestors: set[_Id] = set()

    def enter(folder: Path, st: os.stat_result) -> Skipped | None:
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            return _problem(folder, exc, False, listing=True)
        stack.append((_id(st), iter(entries)))
        ancestors.add(_id(st))
        return None

    if problem := enter(root, root_st):
        yield problem
    while stack:
        folder_id, entries = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            ancestors.discard(folder_id)
            continue
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        try:
            st = entry.stat()  # follows links
        except OSError as exc:
            yield _problem(path, exc, entry.is_symlink())
            continue
        if excluded.has(entry.path, st):
            continue
        if not stat.S_ISDIR(st.st_mode):
            yield _file(path, st)
        elif _id(st) in ancestors:
            yield Skipped(path, "symlink-loop", f"{path}: links back to a folder above it (a loop)")
        elif problem := enter(path, st):
            yield problem


def _id(st: os.stat_result) -> _Id:
    return st.st_dev, st.st_ino


def _file(path: Path, st: os.stat_result) -> PhotoFile | Skipped:
    if not stat.S_ISREG(st.st_mode):
        return Skipped(path, "not-a-file", f"{path}: not a regular file or folder")
    if not os.access(path, os.R_OK):
        return Skipped(path, "unreadable", f"{path}: cannot be read (permission denied)")
    return PhotoFile(path, st.st_size, st.st_mtime_ns)


def _problem(path: Path, exc: OSError, is_link: bool, listing: bool = False) -> Skipped:
    """The ``Skipped`` for an error from stat (or, with ``listing``, from listing a folder)."""
    if exc.errno == errno.ELOOP:
        return Skipped(path, "symlink-loop", f"{path}: too many levels of symbolic links")
    if isinstance(exc, FileNotFoundError) and is_link:
        return Skipped(path, "broken-link", f"{path}: broken symbolic link (no such target)")
    if isinstance(exc, FileNotFoundError):
        return Skipped(path, "missing", f"{path}: no such file or folder")
    what = "folder cannot be listed" if listing else "cannot be read"
    return Skipped(path, "unreadable", f"{path}: {what} ({exc.strerror or exc})")
