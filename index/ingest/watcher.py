"""Folders that stay indexed: what changes under them reaches the gallery within seconds.

Run by ``groundsearch index --watch`` or ``serve --watch``: notifications (``watchfiles``),
then a full pass to catch up; changes are debounced into batches, each an indexer pass over
the paths as they are *now* (gone paths forgotten after the additions, so a renamed photo
keeps its id). A folder that disappears or turns empty forgets nothing until it is back.
Events (``on_event(kind, data)``): ``caught-up``, ``changes``, ``missing``, ``back``,
``kept``, ``polling``, ``error``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from watchfiles import watch

from groundsearch.index.ingest.indexer import Indexer, IndexReport
from groundsearch.index.ingest.indexing_runs import IndexedFiles

log = logging.getLogger("groundsearch.index.ingest.watcher")

#: Changes are handled once none came for this long (ms)…
STEP_MS = 50
#: … or once they have been gathered this long (ms), in a burst.
DEBOUNCE_MS = 1000
#: In a long batch, photos are committed (searchable) at least this often (s).
COMMIT_SECONDS = 1.0
#: How often the watcher looks for folders that went missing or came back (ms).
TICK_MS = 500
#: After a failed pass, wait this long before catching up again (s), doubling to …
RETRY_S = 1.0
#: … at most this.
RETRY_MAX_S = 60.0
#: What the ``missing`` and ``kept`` events say of a folder, after its path.
GONE = "is gone (deleted or unmounted): its photos are kept until it is back"
KEPT = "is empty but the gallery holds photos from it (an unmounted drive?): they are kept"

Event = Callable[[str, dict[str, Any]], None]
_Identity = tuple[int, int]


def folder_identity(path: Path) -> _Identity | None:
    """(device, inode) of a folder; None when ``path`` is no folder (now)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isdir(path):
        return None
    return st.st_dev, st.st_ino


class FolderWatcher:
    """Keeps ``indexer``'s folders (``Indexer.roots``) and its gallery in step."""

    def __init__(
        self,
        indexer: Indexer,
        on_event: Event | None = None,
        step_ms: int = STEP_MS,
        debounce_ms: int = DEBOUNCE_MS,
        tick_ms: int = TICK_MS,
        progress: bool = False,
    ) -> None:
        self.indexer = indexer
        self.progress = progress  # a progress bar for the full passes
        self.roots = list(indexer.roots)
        self.files = IndexedFiles(indexer.gallery)
        self.on_event = on_event or _log_event
        self.step_ms, self.debounce_ms, self.tick_ms = step_ms, debounce_ms, tick_ms
        self.force_polling: bool | None = None  # watchfiles' default (its env variable)
        self._missing: set[Path] = set()
        self._kept: set[Path] = set()

    def run(self, stop: threading.Event) -> None:
        """Watch until ``stop`` is set, a round per change of the folders present."""
        retry = RETRY_S
        while not stop.is_set():
            present = self._look()
            if not present:  # nothing to watch: wait for a folder to come back
                stop.wait(self.tick_ms / 1000)
                continue
            try:
                self._round(present, stop)
                retry = RETRY_S
            except Exception as exc:  # a pass that failed (a locked or full disk, …)
                log.exception("watching %s failed", ", ".join(map(str, present)))
                self.on_event("error", {"error": f"{type(exc).__name__}: {exc}", "retry_s": retry})
                stop.wait(retry)
                retry = min(2 * retry, RETRY_MAX_S)

    def _look(self) -> dict[Path, _Identity]:
        """The folders there now, by identity; says which went missing or came back."""
        present = {}
        for root in self.roots:
            ident = folder_identity(root)
            if ident is None:
                if root not in self._missing:
                    self._missing.add(root)
                    self.on_event("missing", {"folder": str(root), "message": f"{root} {GONE}"})
                continue
            if root in self._missing:
                self._missing.discard(root)
                self.on_event("back", {"folder": str(root)})
            present[root] = ident
        return present

    def _round(self, present: dict[Path, _Identity], stop: threading.Event) -> None:
        """Watch the ``present`` folders, catch up, then handle changes until ``stop`` or
        a folder goes, comes back or is replaced (a new inode, another mount)."""
        with contextlib.closing(self._changes(list(present), stop)) as batches:
            first = next(batches, None)  # the watch is set up: nothing is missed from now
            if first is None:
                return
            report = self._pass(stop, list(present), forget=list(present), progress=self.progress)
            self.on_event("caught-up", {**report.summary(), "lines": report.lines()})
            for changes in itertools.chain([first], batches):
                if stop.is_set():
                    return
                if changes:
                    self._handle(changes, stop)
                if any(root in changes for root in present) or self._replaced(present):
                    return  # watch again from scratch (a deleted root's watch is dead)

    def _changes(
        self, folders: list[Path], stop: threading.Event
    ) -> Generator[set[Path], None, None]:
        """Batches of changed paths (an empty one every ``tick_ms`` when nothing changes)."""
        batches = watch(
            *folders,
            watch_filter=None,
            debounce=self.debounce_ms,
            step=self.step_ms,
            stop_event=stop,
            rust_timeout=self.tick_ms,
            yield_on_timeout=True,
            raise_interrupt=False,
            force_polling=self.force_polling,
            ignore_permission_denied=True,  # an unreadable folder is reported by the walk
        )
        try:
            for changes in batches:
                yield {Path(path) for _, path in changes}
        except OSError as exc:
            if self.force_polling or isinstance(exc, FileNotFoundError):
                raise
            # e.g. inotify's limit of watches reached: poll instead (slower, but whole)
            log.warning("file notifications failed (%s): polling the folders instead", exc)
            self.on_event("polling", {"reason": str(exc)})
            self.force_polling = True
            raise
        finally:
            batches.close()

    def _replaced(self, present: dict[Path, _Identity]) -> bool:
        """Whether a watched folder went, or came back, or another took its place."""
        return any(folder_identity(root) != present.get(root) for root in self.roots)

    def _handle(self, changed: set[Path], stop: threading.Event) -> IndexReport | None:
        """One pass of the indexer over a batch of changed paths."""
        wanted = sorted(p for p in changed if self._watched(p))
        if not wanted:
            return None
        # a folder kept while empty that now has something in it is walked again whole
        again = [k for k in self._kept if any(p == k or _under(p, k) for p in wanted)]
        there = sorted({p for p in [*wanted, *again] if os.path.lexists(p)})
        folders = [p for p in there if os.path.isdir(p)]
        # what a folder of this batch is walked for is not given again on its own
        there = [p for p in there if not any(_under(p, f) and p != f for f in folders)]
        gone = [p for p in wanted if not os.path.lexists(p)]
        report = self._pass(stop, there, forget=folders, gone=gone)
        data = {"paths": len(wanted), **report.summary(), "lines": report.lines()}
        self.on_event("changes", data)
        return report

    def _pass(self, stop: threading.Event, paths: list[Path], **options: Any) -> IndexReport:
        """One indexer pass over ``paths``, stopped by ``stop``, committing every second."""
        return self.indexer.index(
            paths, stop=stop.is_set, keep=self._keep, commit_seconds=COMMIT_SECONDS, **options
        )

    def _watched(self, path: Path) -> bool:
        """Whether the indexer would walk a changed path (watched, not hidden, not ours)."""
        gallery = self.indexer.gallery_dir
        if path == gallery or _under(path, gallery):
            return False
        for root in self.roots:
            if path == root:
                return True
            if _under(path, root):
                return not any(part.startswith(".") for part in path.relative_to(root).parts)
        return False

    def _keep(self, path: Path) -> bool:
        """Whether to leave the files under ``path`` alone: its watched folder is missing,
        or it is an empty folder the gallery holds files under (an unmounted drive)."""
        root = next((r for r in self.roots if path == r or _under(path, r)), None)
        if root is not None and folder_identity(root) is None:
            return True
        if not os.path.isdir(path) or not _empty(path):
            self._kept.discard(path)
            return False
        if not self.files.has_files_under(path):
            return False
        if path not in self._kept:
            self._kept.add(path)
            self.on_event("kept", {"folder": str(path), "message": f"{path} {KEPT}"})
        return True


def _under(path: Path, folder: Path) -> bool:
    return path.is_relative_to(folder) and path != folder


def _empty(folder: Path) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is None
    except OSError:
        return False


def _log_event(kind: str, data: dict[str, Any]) -> None:
    log.info("%s: %s", kind, data)
