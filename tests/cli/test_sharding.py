"""``groundsearch shard`` writes a gallery's shards; ``groundsearch serve --shards 2``
serves them on a local Ray cluster (Ray Serve, one deployment a shard) behind a
read-only front that answers as a one-piece server over the same gallery."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from tests.service.real_server import Server, server_env

QUERIES = ["A dog runs on the beach .", "A man rides a bicycle .", "Two girls smile ."]
TOKEN = "sharding-test-token-0123456789"


def test_shard_writes_the_shards_and_names_them(cli, service_gallery, tmp_path):
    res = cli("shard", "--index", str(service_gallery), "--shards", "3", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["scheme"] == "id mod shards" and summary["kind"] == "flat"
    assert sum(summary["photos"]) == 8 and len(summary["photos"]) == 3
    assert json.loads((tmp_path / "shards.json").read_text())["shards"] == 3
    assert all((tmp_path / f"shard-{s}" / "images.json").is_file() for s in range(3))
    assert "shard 2: " in res.stderr


def test_shard_refuses_what_it_cannot_do(cli, tmp_path):
    res = cli("shard", "--index", str(tmp_path / "none"), "--shards", "2")
    assert res.returncode == 2 and "no gallery at" in res.stderr
    res = cli("shard", "--index", str(tmp_path), "--shards", "0")
    assert res.returncode == 2 and "must be at least 1" in res.stderr


def _ranked(base: str, text: str, **params: object) -> list[tuple[int, float]]:
    query = {"text": text, "k": 10, "min_relevance": 0, **params}
    res = httpx.post(base + "/search", params=query, timeout=60)
    assert res.status_code == 200, res.text
    return [(h["id"], h["score"]) for h in res.json()["results"]]


@pytest.mark.slow
def test_serve_shards_answers_as_one_piece(service_gallery: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray.serve")
    gallery = tmp_path / "gallery"
    shutil.copytree(service_gallery, gallery)
    (tmp_path / "cache").mkdir()
    env = {**server_env(tmp_path / "cache", TOKEN), "GROUNDSEARCH_WRITE_TOKEN": ""}
    plain = Server(gallery, env, tmp_path / "plain.log")
    sharded = Server(gallery, env, tmp_path / "sharded.log", ["--shards", "2"])
    try:
        plain.start()
        plain.ready()
        sharded.start()
        ready = sharded.ready()
        assert ready["read_only"] and ready["images"] == 8
        assert ready["indexes"]["images"].startswith("2 shards (id mod shards)")
        assert (gallery / "shards-2" / "shards.json").is_file()
        for text in QUERIES:
            assert _ranked(sharded.base, text) == _ranked(plain.base, text)
            taken = {"source": "folder", "k": 3}
            assert _ranked(sharded.base, text, **taken) == _ranked(plain.base, text, **taken)
        similar = [
            httpx.get(s.base + "/images/2/similar", timeout=60).json() for s in (plain, sharded)
        ]
        assert similar[0] == similar[1]
        refused = httpx.delete(sharded.base + "/gallery/images/1", timeout=10)
        assert refused.status_code in (401, 403)
        assert sharded.terminate() == 0
    finally:
        sharded.kill()
        plain.kill()


def test_a_sharded_front_is_read_only_and_watches_nothing(cli, tmp_path):
    from groundsearch.service.core.settings import ServiceSettings

    with pytest.raises(ValueError, match="read-only replica"):
        ServiceSettings(index_dir=tmp_path, shards=tmp_path / "shards")
    assert ServiceSettings(index_dir=tmp_path, shards=tmp_path, read_only=True).shards == tmp_path
    res = cli("serve", "--sample", "--index", str(tmp_path / "g"), "--shards", "2", "--watch", ".")
    assert res.returncode == 2 and "read-only front" in res.stderr
