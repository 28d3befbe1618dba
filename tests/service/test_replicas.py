"""Several server processes, one gallery: a writer and a read-only replica.

Both serve the same folder: the replica opens the records read-only, writes nothing,
refuses writes (403 naming the writer), answers exactly as the writer does, and sees the
writer's uploads and deletes within seconds (docs/ARCHITECTURE.md, "Replicas").
"""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import httpx
import pytest

from tests.service.real_server import Server, server_env
from tests.tiny_data import FLICKR

TOKEN = "replica-test-token-0123456789"
QUERIES = ["A dog runs on the beach .", "A man rides a bicycle .", "Two girls smile ."]

pytestmark = pytest.mark.slow


def _ranked(base: str, text: str) -> list[tuple[int, float]]:
    params = {"text": text, "k": 10, "min_relevance": 0}  # the whole ranking, weak hits too
    res = httpx.post(base + "/search", params=params, timeout=60)
    assert res.status_code == 200, res.text
    return [(h["id"], round(h["score"], 5)) for h in res.json()["results"]]


def _files(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def test_a_replica_answers_as_the_writer_and_follows_its_writes(
    service_gallery: Path, tmp_path: Path
) -> None:
    gallery = tmp_path / "gallery"
    shutil.copytree(service_gallery, gallery)
    (tmp_path / "cache").mkdir()
    env = server_env(tmp_path / "cache", TOKEN)
    writer = Server(gallery, env, tmp_path / "writer.log")
    replica = Server(gallery, {**env, "GROUNDSEARCH_READ_ONLY": "true"}, tmp_path / "replica.log")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        writer.start()
        replica.start()
        ready = writer.ready(), replica.ready()
        assert ready[1]["read_only"] and not ready[0]["read_only"]
        assert ready[0]["images"] == ready[1]["images"]
        assert ready[0]["indexes"] == ready[1]["indexes"]
        index_files = _files(gallery / "index")
        for text in QUERIES:
            assert _ranked(replica.base, text) == _ranked(writer.base, text)
        name = (FLICKR / "Flickr_8k.trainImages.txt").read_text().split()[0]
        photo = (FLICKR / "Images" / name).read_bytes()
        refused = httpx.post(
            replica.base + "/gallery/images", headers=auth, files={"image": ("a.jpg", photo)}
        )
        assert refused.status_code == 403 and "read-only replica" in refused.json()["detail"]
        added = httpx.post(
            writer.base + "/gallery/images",
            headers=auth,
            files={"image": ("a.jpg", photo, "image/jpeg")},
            data={"captions": "A photo the replica must find ."},
            timeout=60,
        )
        assert added.status_code == 201, added.text
        image_id = added.json()["id"]
        deadline = time.monotonic() + 10
        while httpx.get(replica.base + f"/images/{image_id}").status_code != 200:
            assert time.monotonic() < deadline, "the replica did not see the upload in 10 s"
            time.sleep(0.2)
        gone = httpx.delete(writer.base + f"/gallery/images/{image_id}", headers=auth)
        assert gone.status_code == 200, gone.text
        deadline = time.monotonic() + 10
        while httpx.get(replica.base + f"/images/{image_id}").status_code != 404:
            assert time.monotonic() < deadline, "the replica did not see the delete in 10 s"
            time.sleep(0.2)
        # its records first, its search index at its next follow: a short query's fused
        # scores are standardised over the index's candidates
        while replica.ready()["images"] != writer.ready()["images"]:
            assert time.monotonic() < deadline, "the replica's index did not follow in 10 s"
            time.sleep(0.2)
        for text in QUERIES:
            assert _ranked(replica.base, text) == _ranked(writer.base, text)
        assert replica.terminate() in (0, -signal.SIGTERM), replica.tail()
        assert _files(gallery / "index") == index_files  # the replica wrote nothing
    finally:
        replica.kill()
        writer.kill()
