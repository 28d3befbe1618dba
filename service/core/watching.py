"""``groundsearch serve --watch PATH``: a ``FolderWatcher`` thread over an ``Indexer``
sharing the server's checkpoint and gallery."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexer import Indexer
from groundsearch.index.ingest.watcher import FolderWatcher
from groundsearch.model.runtime.embedder import Embedder
from groundsearch.model.runtime.objects.detector import ObjectDetector
from groundsearch.service.core.settings import ServiceSettings

log = logging.getLogger("groundsearch.service.core.watching")
#: Added to the watcher thread's niceness (its batches yield the cores to requests).
NICENESS = 10
#: How long a stop waits for the batch under way (it ends at the next photo).
STOP_SECONDS = 30.0


class Watching:
    """The server's watched folders: the indexer session and the thread that follows them."""

    def __init__(self, indexer: Indexer) -> None:
        self.indexer = indexer
        self.watcher = FolderWatcher(indexer, on_event=_log_event)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="folder-watch", daemon=True)

    @classmethod
    def start(
        cls,
        settings: ServiceSettings,
        model: Embedder,
        gallery: Gallery,
        detector: ObjectDetector | None = None,
    ) -> Watching:
        """Start keeping ``settings.watch_folders`` indexed (``IndexingError`` if missing)."""
        indexer = Indexer(
            settings.watch_folders,
            settings.index_path,
            settings.checkpoint_path,
            None,
            workers=settings.watch_workers,
            max_pixels=settings.max_pixels,
            model=model,
            gallery=gallery,
            detector=detector,
        )
        watching = cls(indexer.__enter__())  # the CNN processes start now
        watching.thread.start()
        log.info("watching %s", ", ".join(map(str, indexer.roots)))
        return watching

    def _run(self) -> None:
        with contextlib.suppress(AttributeError, OSError):  # not Linux: as the process
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICENESS)
        try:
            self.watcher.run(self.stop)
        except Exception:  # logged: the server goes on serving what it holds
            log.exception("the folder watcher stopped")

    def close(self) -> None:
        """Stop watching, then the CNN processes; the gallery stays open."""
        self.stop.set()
        self.thread.join(STOP_SECONDS)
        if self.thread.is_alive():
            log.warning("the folder watcher did not stop within %.0f s", STOP_SECONDS)
        self.indexer.close()


def _log_event(kind: str, data: dict[str, Any]) -> None:
    lines = data.pop("lines", [])
    level = logging.WARNING if kind in {"missing", "kept", "error", "polling"} else logging.INFO
    log.log(level, "watch %s: %s", kind, data)
    for line in lines:
        log.warning("watch: %s", line)
