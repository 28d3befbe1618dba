"""Crash safety of the gallery, with real processes killed by SIGKILL.

* ``groundsearch serve`` taking uploads and deletes from two client threads is killed
  at random moments (two while a delete is being handled, one aimed at uploads'
  commits, one while it starts up) and restarted; every acknowledged write must have
  survived whole, and nothing else (half-written rows, stray uploads, temp files,
  unreferenced snapshots) may be left.
* ``groundsearch index`` killed after its first committed batch, then run again:
  every photo once, and the second run embeds only what the first did not commit.
* A running ``groundsearch serve`` sees photos that another process indexed, without
  a restart.

The random choices come from a fixed seed; which requests a kill cuts short still
depends on timing, so a request without an answer counts as "unknown": it may or may
not have landed, but either way it must be whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from PIL import Image, ImageDraw

from tests.service.real_server import Server, server_env, stop
from tests.tiny_data import FLICKR

pytestmark = pytest.mark.slow  # real servers and indexing runs in subprocesses

SEED = 20240611
TOKEN = "crash-safety-write-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
#: Kills of the server while clients write (cycles 0…4), and one more of a server that
#: is starting up (cycle 2's first start).
KILLS = 5
DELETE_KILLS = (1, 3)  # cycles whose kill comes while a DELETE is being handled
COMMIT_KILL = 4  # the cycle whose kill is aimed at uploads' commits
STARTUP_KILL = 2  # the cycle whose first start is killed before it is ready
#: Captions that parse to themselves (clean_text leaves them as they are), words the
#: model knows.
CAPTIONS = [
    "A dog runs on the beach .",
    "Two children play in the snow .",
    "A man rides a bicycle down the street .",
    "A black dog jumps over a log .",
    "A woman in a red coat walks in the park .",
    "A boy swims in a pool .",
    "People stand in front of a building .",
    "A girl with a ball sits on the grass .",
]


# --- processes --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def proc_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of the subprocesses (see ``server_env``)."""
    return server_env(tmp_path_factory.mktemp("crash-cache"), TOKEN)


# --- gallery checks ------------------------------------------------------------------------------


@contextlib.contextmanager
def _read_only(gallery: Path) -> Iterator[sqlite3.Connection]:
    """The gallery database, opened read-only (closed afterwards)."""
    db = sqlite3.connect(f"file:{gallery / 'gallery.db'}?mode=ro", uri=True)
    try:
        yield db
    finally:
        db.close()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def assert_no_leftovers(gallery: Path) -> None:
    """No temp files anywhere; no search-index snapshot that no ``index/*.json`` names;
    every uploaded photo file named by a photo row and every such row's file there."""
    temps = [
        p.relative_to(gallery)
        for p in gallery.rglob("*")
        if p.name.endswith(".tmp") or (p.name.startswith(".") and "tmp" in p.name)
    ]
    assert not temps, f"temp files left: {temps}"
    index = gallery / "index"
    named = {json.loads(p.read_text())["file"] for p in index.glob("*.json")}
    faiss_files = {p.name for p in index.glob("*.faiss")}
    assert faiss_files <= named, f"snapshots no index/*.json names: {faiss_files - named}"
    assert named <= faiss_files, f"index/*.json names missing snapshots: {named - faiss_files}"
    with _read_only(gallery) as db:
        rows = {r[0] for r in db.execute("SELECT path FROM photos WHERE uploaded = 1")}
    uploads = gallery / "uploads"
    files = {f"uploads/{p.name}" for p in uploads.iterdir()} if uploads.is_dir() else set()
    assert files == rows, (
        f"upload files without a photo: {sorted(files - rows)}; "
        f"photos without their file: {sorted(rows - files)}"
    )


def _strays(gallery: Path) -> int:
    """Upload files no photo row names and temp files (what a kill can leave behind)."""
    with _read_only(gallery) as db:
        rows = {r[0] for r in db.execute("SELECT path FROM photos WHERE uploaded = 1")}
    uploads = gallery / "uploads"
    files = {f"uploads/{p.name}" for p in uploads.iterdir()} if uploads.is_dir() else set()
    temps = [p for p in gallery.rglob("*") if p.name.endswith(".tmp")]
    return len(files - rows) + len(set(temps) - {gallery / f for f in files})


@dataclass
class Upload:
    sha: str
    captions: list[str]
    caption_ids: list[int] = field(default_factory=list)


@dataclass
class Ledger:
    """What the clients know: acknowledged writes, and requests a kill left unanswered."""

    original: dict[int, set[int]]  # the gallery's own photos → their caption ids
    live: dict[int, Upload] = field(default_factory=dict)  # acknowledged uploads
    deleted: dict[int, Upload] = field(default_factory=dict)  # acknowledged deletes
    unknown_uploads: list[Upload] = field(default_factory=list)
    unknown_deletes: dict[int, Upload] = field(default_factory=dict)
    claimed: set[int] = field(default_factory=set)  # a delete of it is on its way
    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: dict[str, int] = field(default_factory=dict)

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def claim(self, rng: random.Random) -> int | None:
        """An acknowledged upload to delete (no other thread deletes it meanwhile)."""
        with self.lock:
            free = sorted(set(self.live) - self.claimed)
            if not free:
                return None
            image_id = rng.choice(free)
            self.claimed.add(image_id)
            return image_id


def check_records(gallery: Path, ledger: Ledger) -> dict[str, int]:
    """Check the database against the ledger; then settle the unknown requests (what
    landed counts as acknowledged from now on). Returns what became of the unknowns."""
    with _read_only(gallery) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert not db.execute("PRAGMA foreign_key_check").fetchall()
        photos = {
            r[0]: (r[1], r[2], r[3])
            for r in db.execute("SELECT id, sha256, path, uploaded FROM photos")
        }
        by_sha = {sha: i for i, (sha, _, _) in photos.items()}
        captions: dict[int, dict[int, str]] = {}
        for cid, pid, text in db.execute("SELECT id, photo_id, text FROM captions"):
            captions.setdefault(pid, {})[cid] = text
        removed = set(db.execute("SELECT kind, item FROM removals").fetchall())
        dim = len(db.execute("SELECT vector FROM photos LIMIT 1").fetchone()[0])
        bad = db.execute(
            "SELECT count(*) FROM photos WHERE length(vector) <> ?", (dim,)
        ).fetchone()[0]
        bad += db.execute(
            "SELECT count(*) FROM captions WHERE length(vector) <> ?", (dim,)
        ).fetchone()[0]
        assert bad == 0, "vectors of the wrong length"

    orphans = set(captions) - set(photos)
    assert not orphans, f"captions of photos that are not there: {orphans}"

    def whole(image_id: int, up: Upload) -> None:
        sha, path, uploaded = photos[image_id]
        assert (sha, uploaded) == (up.sha, 1), f"photo {image_id} is not the one uploaded"
        assert path == f"uploads/{up.sha}.jpg"
        got = captions.get(image_id, {})
        assert sorted(got.values()) == sorted(up.captions), f"photo {image_id}: {got}"
        if up.caption_ids:
            assert sorted(got) == sorted(up.caption_ids)

    def gone(image_id: int, up: Upload) -> None:
        assert image_id not in photos and up.sha not in by_sha
        assert image_id not in captions
        # logged in the same transaction (how other processes' indexes follow deletes)
        assert ("images", image_id) in removed
        assert {("captions", c) for c in up.caption_ids} <= removed

    for image_id, caption_ids in ledger.original.items():
        assert set(captions.get(image_id, {})) == caption_ids, "the gallery's own photo"
    for image_id, up in ledger.live.items():
        assert image_id in photos, f"acknowledged upload {image_id} is gone"
        whole(image_id, up)
    for image_id, up in ledger.deleted.items():
        gone(image_id, up)
    settled = {"uploads landed": 0, "uploads lost": 0, "deletes landed": 0, "deletes lost": 0}
    for up in ledger.unknown_uploads:
        if up.sha in by_sha:
            image_id = by_sha[up.sha]
            whole(image_id, up)
            up.caption_ids = sorted(captions.get(image_id, {}))
            ledger.live[image_id] = up
            settled["uploads landed"] += 1
        else:
            settled["uploads lost"] += 1
    for image_id, up in ledger.unknown_deletes.items():
        if image_id in photos:
            whole(image_id, up)
            ledger.live[image_id] = up
            settled["deletes lost"] += 1
        else:
            gone(image_id, up)
            ledger.deleted[image_id] = up
            settled["deletes landed"] += 1
    ledger.unknown_uploads, ledger.unknown_deletes = [], {}
    # nothing else is there: the gallery's photos, and what the clients uploaded
    assert set(photos) == set(ledger.original) | set(ledger.live)
    return settled


def check_api(server: Server, gallery: Path, ledger: Ledger) -> None:
    """The restarted server serves every live upload and none of the deleted ones, and
    its search index holds exactly the recorded photos and captions."""
    with _read_only(gallery) as db:
        n_photos = db.execute("SELECT count(*) FROM photos").fetchone()[0]
        n_captions = db.execute("SELECT count(*) FROM captions").fetchone()[0]
    ready = server.ready()
    assert (ready["images"], ready["captions"]) == (n_photos, n_captions)
    with httpx.Client(base_url=server.base, timeout=30) as client:
        for image_id, up in ledger.live.items():
            res = client.get(f"/images/{image_id}")
            assert res.status_code == 200, f"upload {image_id}: {res.status_code} {res.text}"
            assert _sha(res.content) == up.sha
        for image_id in ledger.deleted:
            assert client.get(f"/images/{image_id}").status_code == 404
        k = min(n_photos, 100)
        hits = client.post(  # every hit: this checks durability, not relevance
            "/search", params={"text": CAPTIONS[0], "k": k, "min_relevance": 0}
        )
        assert hits.status_code == 200
        found = [h["id"] for h in hits.json()["results"]]
        assert len(found) == len(set(found)) == k
        assert set(found) <= set(ledger.original) | set(ledger.live)


# --- the server test ---------------------------------------------------------------------------


class Photos:
    """New photo bytes on demand: a real Flickr8k photo, shrunk, with a random block
    drawn on it (so every upload is a photo the gallery does not hold)."""

    def __init__(self, rng: random.Random, taken: set[str]) -> None:
        names = (FLICKR / "Flickr_8k.trainImages.txt").read_text().split()
        self.sources = [FLICKR / "Images" / n for n in names[:40] if n not in taken]
        self.rng, self.lock, self.made = rng, threading.Lock(), 0

    def next(self) -> bytes:
        with self.lock:
            rng, self.made = self.rng, self.made + 1
            source = rng.choice(self.sources)
            x, y, size = rng.randrange(0, 200), rng.randrange(0, 150), rng.randrange(8, 60)
            colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        with Image.open(source) as img:
            img = img.convert("RGB")
            img.thumbnail((320, 320))
        ImageDraw.Draw(img).rectangle((x, y, x + size, y + size), fill=colour)
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=85)
        return buf.getvalue()


def _upload(client: httpx.Client, photos: Photos, rng: random.Random, ledger: Ledger) -> None:
    data = photos.next()
    with ledger.lock:
        texts = rng.sample(CAPTIONS, rng.randint(1, 3))
    up = Upload(_sha(data), texts)
    try:
        res = client.post(
            "/gallery/images",
            files={"image": ("photo.jpg", data, "image/jpeg")},
            data={"captions": texts},
            headers=AUTH,
        )
    except httpx.HTTPError:
        with ledger.lock:
            ledger.unknown_uploads.append(up)
        ledger.count("uploads cut short")
        raise
    assert res.status_code == 201, res.text
    body = res.json()
    assert body["new"] is True and len(body["captions"]) == len(texts)
    up.caption_ids = body["captions"]
    with ledger.lock:
        ledger.live[body["id"]] = up
    ledger.count("uploads acknowledged")


def _delete(client: httpx.Client, image_id: int, ledger: Ledger) -> None:
    try:
        res = client.delete(f"/gallery/images/{image_id}", headers=AUTH)
    except httpx.HTTPError:
        with ledger.lock:
            ledger.unknown_deletes[image_id] = ledger.live.pop(image_id)
            ledger.claimed.discard(image_id)
        ledger.count("deletes cut short")
        raise
    assert res.status_code == 200, res.text
    up = ledger.live[image_id]
    assert res.json() == {"id": image_id, "removed_captions": len(up.captions)}
    with ledger.lock:
        ledger.deleted[image_id] = ledger.live.pop(image_id)
        ledger.claimed.discard(image_id)
    ledger.count("deletes acknowledged")


def _writer(
    base: str, seed: int, photos: Photos, ledger: Ledger, stop: threading.Event, errors: list
) -> None:
    """Uploads (1–3 captions) and deletes of acknowledged uploads until the server dies."""
    rng = random.Random(seed)
    with httpx.Client(base_url=base, timeout=120) as client:
        while not stop.is_set():
            try:
                image_id = ledger.claim(rng) if rng.random() < 0.35 else None
                if image_id is None:
                    _upload(client, photos, rng, ledger)
                else:
                    _delete(client, image_id, ledger)
            except httpx.HTTPError:
                return  # the server is gone
            except BaseException as exc:  # an answer that is wrong: the test fails
                errors.append(exc)
                return


@contextlib.contextmanager
def _write_lock_held(gallery: Path) -> Iterator[None]:
    """Hold the database's write lock, as another process's long write would: the
    server's writes wait for it (in ``BEGIN IMMEDIATE``), and all go on at once when it
    is released, which is when a kill aimed at their commit comes."""
    db = sqlite3.connect(gallery / "gallery.db", isolation_level=None, timeout=30)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
        db.execute("ROLLBACK")
    finally:
        db.close()


def _delete_then_kill(server: Server, ledger: Ledger, rng: random.Random) -> bool:
    """Send a DELETE of an acknowledged upload and SIGKILL the server while it handles
    it: the delete waits for the write lock, and the kill comes within 150 ms of its
    release (before, during or just after the commit and the file's removal). False if
    there was nothing to delete."""
    image_id = ledger.claim(rng)
    if image_id is None:
        return False
    host, port = server.base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    with _write_lock_held(server.gallery):
        conn.request("DELETE", f"/gallery/images/{image_id}", headers=AUTH)
        time.sleep(0.3)
    time.sleep(rng.uniform(0.0, 0.15))
    server.kill()
    conn.close()
    with ledger.lock:
        ledger.unknown_deletes[image_id] = ledger.live.pop(image_id)
        ledger.claimed.discard(image_id)
    ledger.count("deletes killed on purpose")
    return True


def _commits_then_kill(server: Server, rng: random.Random) -> None:
    """Let the uploads in flight reach their commit and wait there; release them and
    SIGKILL the server just after a new file shows in ``uploads/`` (an upload writes
    its file inside its transaction, before its commit)."""
    uploads = server.gallery / "uploads"
    before = set(os.listdir(uploads)) if uploads.is_dir() else set()
    with _write_lock_held(server.gallery):
        time.sleep(rng.uniform(0.5, 1.5))
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        if uploads.is_dir() and set(os.listdir(uploads)) - before:
            time.sleep(rng.uniform(0.0, 0.008))  # before, during or after its commit
            break
    server.kill()


def test_server_killed_at_random_moments_loses_no_acknowledged_write(
    service_gallery: Path, proc_env: dict[str, str], tmp_path: Path
) -> None:
    import shutil

    gallery = tmp_path / "gallery"
    shutil.copytree(service_gallery, gallery)
    rng = random.Random(SEED)
    with _read_only(gallery) as db:
        original: dict[int, set[int]] = {r[0]: set() for r in db.execute("SELECT id FROM photos")}
        for cid, pid in db.execute("SELECT id, photo_id FROM captions"):
            original[pid].add(cid)
        taken = {Path(r[0]).name for r in db.execute("SELECT path FROM photos")}
    ledger = Ledger(original=original)
    photos = Photos(random.Random(SEED + 1), taken)
    server = Server(gallery, proc_env, tmp_path / "server.log")
    outcomes: list[dict[str, int]] = []
    try:
        for cycle in range(KILLS + 1):
            server.start()
            if cycle == STARTUP_KILL:  # killed while it opens (and snapshots) the gallery
                time.sleep(rng.uniform(1.0, 10.0))
                assert server.proc is not None and server.proc.poll() is None
                server.kill()
                ledger.count("kills during start-up")
                server.start()
            server.ready()
            outcomes.append(check_records(gallery, ledger))
            assert_no_leftovers(gallery)
            check_api(server, gallery, ledger)
            if cycle == KILLS:
                break
            stop, errors = threading.Event(), []
            writers = [
                threading.Thread(
                    target=_writer,
                    args=(server.base, SEED + 100 * cycle + t, photos, ledger, stop, errors),
                )
                for t in range(2)
            ]
            for w in writers:
                w.start()
            time.sleep(rng.uniform(1.5, 4.0))
            if cycle in DELETE_KILLS:
                deadline = time.monotonic() + 30
                while not _delete_then_kill(server, ledger, rng):
                    assert time.monotonic() < deadline, "no upload to delete"
                    time.sleep(0.2)
            elif cycle == COMMIT_KILL:
                _commits_then_kill(server, rng)
            else:
                server.kill()
            ledger.count("kills")
            stop.set()
            for w in writers:
                w.join(timeout=60)
            assert not errors, errors
            ledger.counts["left for the restart to clear"] = ledger.counts.get(
                "left for the restart to clear", 0
            ) + _strays(gallery)
        # uvicorn shuts down, then re-raises the SIGTERM it caught
        assert server.terminate() in (0, -signal.SIGTERM), server.tail()
        outcomes.append(check_records(gallery, ledger))
        assert_no_leftovers(gallery)
    finally:
        server.kill()
    print(f"\n{server.starts} starts; {ledger.counts}; unknown requests: {outcomes}")
    assert ledger.counts.get("kills") == KILLS
    assert ledger.counts.get("deletes killed on purpose") == len(DELETE_KILLS)
    assert ledger.counts.get("uploads acknowledged", 0) >= 10
    assert ledger.counts.get("deletes acknowledged", 0) >= 2
    assert_snapshot_matches(gallery)


def assert_snapshot_matches(gallery: Path) -> None:
    """The search indexes a clean shutdown snapshotted hold exactly the recorded items."""
    import faiss

    with _read_only(gallery) as db:
        ids = {
            "images": {r[0] for r in db.execute("SELECT id FROM photos")},
            "captions": {r[0] for r in db.execute("SELECT id FROM captions")},
        }
    for kind, expected in ids.items():
        doc = json.loads((gallery / "index" / f"{kind}.json").read_text())
        index = faiss.read_index(str(gallery / "index" / doc["file"]))
        held = set(faiss.vector_to_array(index.id_map).tolist()) - set(doc["tombstones"])
        assert held == expected, kind


# --- indexing ------------------------------------------------------------------------------------


def _train_photos(folder: Path, start: int, n: int) -> dict[str, str]:
    """Link ``n`` Flickr8k training photos into ``folder``; name → content hash."""
    folder.mkdir(parents=True)
    names = (FLICKR / "Flickr_8k.trainImages.txt").read_text().split()[start : start + n]
    for name in names:
        (folder / name).symlink_to(FLICKR / "Images" / name)
    return {name: _sha((FLICKR / "Images" / name).read_bytes()) for name in names}


def _index_cmd(photos: Path, gallery: Path) -> list[str]:
    return [
        *(sys.executable, "-m", "groundsearch.cli", "index", str(photos)),
        *("--index", str(gallery), "--quiet", "--workers", "1"),
    ]


def _count(gallery: Path, table: str) -> int:
    """Rows committed so far (0 while the database is not there yet)."""
    try:
        with _read_only(gallery) as db:
            return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    except sqlite3.Error:
        return 0


def _group_gone(pgid: int, timeout: float) -> bool:
    """Whether every process of the group has exited within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.2)
    return False


def test_index_killed_mid_run_keeps_its_batches_and_a_rerun_completes(
    proc_env: dict[str, str], tmp_path: Path
) -> None:
    from groundsearch.index.ingest.indexer import COMMIT_EVERY

    n = 2 * COMMIT_EVERY + 2  # two full batches and a bit: room to kill between commits
    photos, gallery = tmp_path / "photos", tmp_path / "gallery"
    shas = _train_photos(photos, 100, n)
    assert len(set(shas.values())) == n
    log = tmp_path / "index.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            _index_cmd(photos, gallery),
            env=proc_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        while proc.poll() is None and _count(gallery, "photos") == 0:
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before the kill:\n{log.read_text()}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # its CNN worker notices and exits too (it would wait forever on its pipe)
        assert _group_gone(proc.pid, 20), "processes of the killed run are still running"
    finally:
        stop(proc)
    committed = _count(gallery, "files")
    assert committed == _count(gallery, "photos")
    assert 0 < committed < n and committed % COMMIT_EVERY == 0, committed  # whole batches

    rerun = subprocess.run(
        _index_cmd(photos, gallery), env=proc_env, capture_output=True, text=True, timeout=600
    )
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    print(f"\nkilled after {committed} photos; the re-run: {summary}")
    assert summary["files_found"] == n
    assert summary["unchanged"] == committed  # what the first run committed is not redone
    assert summary["photos_embedded"] == n - committed
    assert summary["photos_embedded"] + summary["unchanged"] == summary["files_found"]
    assert summary["duplicates"] == 0 and summary["skipped"] == {}
    assert summary["gallery_photos"] == n

    with _read_only(gallery) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        photo_shas = [r[0] for r in db.execute("SELECT sha256 FROM photos")]
        files = db.execute(
            "SELECT f.path, p.sha256 FROM files f JOIN photos p ON p.id = f.photo_id"
        ).fetchall()
        assert db.execute("SELECT count(*) FROM files").fetchone()[0] == len(files)
    assert len(photo_shas) == len(set(photo_shas)) == n  # every photo exactly once
    assert sorted(photo_shas) == sorted(shas.values())
    paths = [p for p, _ in files]
    assert len(paths) == len(set(paths)) == n  # every file exactly once
    assert {Path(p).name: sha for p, sha in files} == shas
    assert_no_leftovers(gallery)


# --- serving while another process indexes -----------------------------------------------------


def test_a_running_server_sees_photos_another_process_indexed(
    service_gallery: Path, proc_env: dict[str, str], tmp_path: Path
) -> None:
    import shutil

    gallery = tmp_path / "gallery"
    shutil.copytree(service_gallery, gallery)
    shas = _train_photos(tmp_path / "new", 40, 10)
    server = Server(gallery, proc_env, tmp_path / "server.log")
    out = tmp_path / "index.out"
    indexer: subprocess.Popen | None = None
    try:
        server.start()
        before = server.ready()["images"]
        after = before + len(shas)
        with open(out, "w") as fh:
            indexer = subprocess.Popen(
                _index_cmd(tmp_path / "new", gallery),
                env=proc_env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        committed = seen = exited = None  # when the records, the server, the run got there
        deadline = time.monotonic() + 600
        with httpx.Client(base_url=server.base, timeout=10) as client:
            while seen is None or exited is None:
                now = time.monotonic()
                if exited is None and indexer.poll() is not None:
                    exited = now
                    assert indexer.returncode == 0, out.read_text()
                if committed is None and _count(gallery, "photos") == after:
                    committed = now
                images = client.get("/ready").json()["images"]
                assert images in (before, after)  # one transaction: all ten or none
                if seen is None and images == after:
                    seen = now
                assert exited is None or now - exited < 10, "not seen 10 s after the run"
                assert now < deadline, f"the run did not end:\n{out.read_text()}"
                time.sleep(0.1)
        assert committed is not None and seen >= committed
        print(f"\nthe server saw the photos {seen - committed:.1f} s after their commit")
        assert seen - committed < 5  # the server follows the records every second
        summary = json.loads(out.read_text().strip().splitlines()[-1])
        assert summary["photos_embedded"] == len(shas)
        with _read_only(gallery) as db:
            marks = ",".join("?" * len(shas))
            new_ids = {
                r[0]
                for r in db.execute(
                    f"SELECT id FROM photos WHERE sha256 IN ({marks})", list(shas.values())
                )
            }
        assert len(new_ids) == len(shas)
        res = httpx.post(
            server.base + "/search",
            params={"text": "A dog runs on the beach .", "k": after, "min_relevance": 0},
            timeout=60,
        )
        assert res.status_code == 200, res.text
        found = {h["id"] for h in res.json()["results"]}
        assert new_ids & found
        assert new_ids <= found  # k is the whole gallery: every photo is among them
        for image_id in sorted(new_ids)[:2]:
            assert httpx.get(f"{server.base}/images/{image_id}", timeout=30).status_code == 200
    finally:
        if indexer is not None:
            stop(indexer)
        server.kill()
