"""``groundsearch index PATH --watch`` and ``groundsearch serve --watch PATH`` as real
processes: killed with SIGKILL in the middle of a burst, a watcher leaves whole photos
and its next start catches up; SIGTERM stops it cleanly; a server that watches a folder
answers ``/search`` with a photo seconds after it lands, and forgets it when it goes.

Waits are bounded polls, never timed assertions."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from groundsearch.service.core.settings import ServiceSettings
from tests.service.real_server import Server, server_env, stop
from tests.service.test_crash_safety import assert_no_leftovers, assert_snapshot_matches
from tests.tiny_data import FLICKR

WAIT_S = 180.0


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return server_env(tmp_path_factory.mktemp("watch-cache"), "watch-tests-write-token")


def train_photos(start: int, n: int) -> list[Path]:
    names = (FLICKR / "Flickr_8k.trainImages.txt").read_text().split()[start : start + n]
    return [FLICKR / "Images" / name for name in names]


class Watcher:
    """``groundsearch index FOLDER --watch`` in a subprocess; its JSON events in a queue."""

    def __init__(self, folder: Path, gallery: Path, env: dict[str, str], log: Path) -> None:
        cmd = [sys.executable, "-m", "groundsearch.cli", "index", str(folder), "--watch"]
        cmd += ["--index", str(gallery), "--workers", "1", "--quiet"]
        self.log = open(log, "a")  # noqa: SIM115 (closed with the process)
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True
        )
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def wait_event(self, kind: str, timeout: float = WAIT_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self.events.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self.events.empty():
                    pytest.fail(f"the watcher exited ({self.proc.returncode}) before {kind!r}")
                continue
            self.seen.append(event)
            if event["event"] == kind:
                return event
        pytest.fail(f"no {kind!r} event within {timeout:.0f} s; saw {self.seen}")

    def close(self) -> None:
        stop(self.proc)
        self.log.close()


@contextlib.contextmanager
def watcher(folder: Path, gallery: Path, env: dict[str, str], log: Path) -> Iterator[Watcher]:
    w = Watcher(folder, gallery, env, log)
    try:
        yield w
    finally:
        w.close()


def count(gallery: Path, table: str) -> int:
    try:
        db = sqlite3.connect(f"file:{gallery / 'gallery.db'}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        db.close()


def wait_for(what: str, check: Any, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.05)


def assert_whole(gallery: Path) -> dict[str, str]:
    """Every file names a photo, every photo has a file, nothing twice; file → sha."""
    db = sqlite3.connect(f"file:{gallery / 'gallery.db'}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        files = db.execute(
            "SELECT f.path, p.sha256 FROM files f JOIN photos p ON p.id = f.photo_id"
        ).fetchall()
        assert db.execute("SELECT count(*) FROM files").fetchone()[0] == len(files)
        orphans = "SELECT count(*) FROM photos p WHERE NOT EXISTS "
        orphans += "(SELECT 1 FROM files f WHERE f.photo_id = p.id)"
        assert db.execute(orphans).fetchone()[0] == 0
        shas = [r[0] for r in db.execute("SELECT sha256 FROM photos")]
    finally:
        db.close()
    assert len(shas) == len(set(shas))
    return {Path(p).name: sha for p, sha in files}


@pytest.mark.slow
def test_a_watcher_killed_mid_burst_leaves_whole_photos_and_catches_up(env, tmp_path):
    folder, gallery = tmp_path / "photos", tmp_path / "gallery"
    folder.mkdir()
    photos = train_photos(300, 150)
    log = tmp_path / "watch.log"
    with watcher(folder, gallery, env, log) as w:
        w.wait_event("caught-up")
        for photo in photos:  # the burst: 150 photos land at once
            (folder / photo.name).symlink_to(photo)
        wait_for("a first commit", lambda: count(gallery, "photos") > 0)
        assert w.proc.poll() is None
        os.kill(w.proc.pid, signal.SIGKILL)  # no shutdown code runs
        w.proc.wait()
        # its CNN worker notices and exits too
        wait_for("the killed watcher's worker gone", lambda: _group_gone(w.proc.pid), 30)
    committed = count(gallery, "files")
    assert 0 < committed < len(photos), committed
    assert len(assert_whole(gallery)) == committed  # nothing half-written

    with watcher(folder, gallery, env, log) as w:  # the next start catches up first
        caught = w.wait_event("caught-up")
        print(f"\nkilled after {committed} of {len(photos)} photos; the restart: {caught}")
        assert caught["files_found"] == len(photos)
        assert caught["unchanged"] == committed  # what was committed is not done again
        assert caught["photos_embedded"] == len(photos) - committed
        assert caught["gallery_photos"] == len(photos)
        (folder / photos[0].name).unlink()  # and then watches
        assert w.wait_event("changes")["gallery_photos"] == len(photos) - 1
        os.kill(w.proc.pid, signal.SIGTERM)
        w.wait_event("stopped")
        assert w.proc.wait(60) == 0
    files = assert_whole(gallery)
    assert sorted(files) == sorted(p.name for p in photos[1:])
    assert_snapshot_matches(gallery)  # a clean stop snapshots the search indexes
    assert_no_leftovers(gallery)


@pytest.mark.slow
def test_sigterm_in_the_middle_of_a_batch_stops_cleanly(env, tmp_path):
    folder, gallery = tmp_path / "photos", tmp_path / "gallery"
    folder.mkdir()
    photos = train_photos(500, 150)
    with watcher(folder, gallery, env, tmp_path / "watch.log") as w:
        w.wait_event("caught-up")
        for photo in photos:
            (folder / photo.name).symlink_to(photo)
        wait_for("a first commit", lambda: count(gallery, "photos") > 0)
        os.kill(w.proc.pid, signal.SIGTERM)  # the watcher alone, as `docker stop` does
        w.wait_event("stopped")
        assert w.proc.wait(60) == 0
        # its CNN worker ended with it
        wait_for("the process group gone", lambda: _group_gone(w.proc.pid))
    committed = count(gallery, "files")
    print(f"\nstopped by SIGTERM with {committed} of {len(photos)} photos committed")
    assert 0 < committed <= len(photos)
    assert len(assert_whole(gallery)) == committed
    assert_snapshot_matches(gallery)
    assert_no_leftovers(gallery)


def _group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.slow
def test_a_server_that_watches_a_folder_serves_a_photo_seconds_after_it_lands(env, tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    photos = train_photos(700, 3)
    shutil.copy(photos[0], folder / "before.jpg")  # indexed by the full pass at start
    server = Server(
        tmp_path / "gallery", {**env, "GROUNDSEARCH_WATCH": str(folder)}, tmp_path / "log"
    )
    server.start()
    try:
        ready = server.ready()
        assert ready["read_only"] is False

        def files() -> set[str]:
            res = httpx.post(server.base + "/search", params={"text": "a dog", "k": 10}, timeout=30)
            res.raise_for_status()
            body = res.json()
            return {hit["file"] for hit in body["results"] + body["weak"]}

        wait_for("the photo there at start", lambda: files() == {"before.jpg"})
        shutil.copy(photos[1], folder / ".landing.jpg")  # hidden while it is written
        os.rename(folder / ".landing.jpg", folder / "landed.jpg")
        wait_for("the photo that landed", lambda: files() == {"before.jpg", "landed.jpg"})
        os.rename(folder / "landed.jpg", folder / "renamed.jpg")
        wait_for("the rename", lambda: files() == {"before.jpg", "renamed.jpg"})
        (folder / "before.jpg").unlink()
        wait_for("the deletion", lambda: files() == {"renamed.jpg"})
        assert server.terminate() in (0, -signal.SIGTERM), server.tail()
    finally:
        server.kill()
    assert_snapshot_matches(tmp_path / "gallery")


def test_a_read_only_replica_cannot_watch_folders(tmp_path):
    with pytest.raises(ValueError, match="read-only replica cannot keep folders indexed"):
        ServiceSettings(read_only=True, watch=str(tmp_path))
    settings = ServiceSettings(watch=f"{tmp_path}/a{os.pathsep}{tmp_path}/b")
    assert settings.watch_folders == [tmp_path / "a", tmp_path / "b"]
    assert ServiceSettings().watch_folders == []


@pytest.mark.slow
def test_watch_refuses_what_it_cannot_watch(cli, tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"x")
    for args, message in [
        ([str(tmp_path / "none")], "no such folder"),
        ([str(tmp_path / "a.jpg")], "not a folder"),
        (["--sample"], "name them"),
        ([str(tmp_path), "--ray", "local"], "leave out --ray"),
    ]:
        done = cli("index", *args, "--watch", "--index", str(tmp_path / "g"))
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
    done = cli("serve", "--watch", str(tmp_path / "none"), "--index", str(tmp_path / "g"))
    assert done.returncode != 0 and "no such folder" in done.stderr
