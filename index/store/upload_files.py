"""A gallery's ``uploads/``: a writer clears on open the files no record names (a crash's),
holding the lock exclusively."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from groundsearch.common.files import atomic_path

log = logging.getLogger("groundsearch.index")
UPLOADS = "uploads"
UPLOADS_LOCK = "uploads.lock"


@contextlib.contextmanager
def flocked(path: Path, exclusive: bool = True) -> Iterator[None]:
    """``path`` held locked (``flock``): exclusively, or shared."""
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class UploadFiles:
    """The uploaded photos' files of the gallery in ``folder``, named relative to it."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    @staticmethod
    def name_for(sha256: str, extension: str) -> str:
        return f"{UPLOADS}/{sha256}.{extension}"

    def locked(self, exclusive: bool = False) -> contextlib.AbstractContextManager[None]:
        """Held shared by an upload from its file to its commit, exclusively to delete."""
        return flocked(self.folder / UPLOADS_LOCK, exclusive)

    def write(self, name: str, data: bytes) -> None:
        """The photo's file, on disk when it returns (kept if already there)."""
        path = self.folder / name
        if path.exists():
            return
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def delete(self, name: str) -> None:
        (self.folder / name).unlink(missing_ok=True)

    def clear(self, named: Callable[[], set[str]]) -> None:
        """Delete every file in ``uploads/`` that ``named()`` leaves out (exclusively)."""
        uploads = self.folder / UPLOADS
        if not uploads.is_dir():
            return
        with self.locked(exclusive=True):
            keep = named()
            for path in uploads.iterdir():
                if f"{UPLOADS}/{path.name}" not in keep:
                    log.info("removing %s: no photo names it (an interrupted write)", path)
                    path.unlink(missing_ok=True)
