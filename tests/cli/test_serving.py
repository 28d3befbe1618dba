"""``groundsearch serve``: which gallery it starts with, and what it refuses."""

from __future__ import annotations

import json
import shutil
import sqlite3

from groundsearch.common.settings import get_settings
from groundsearch.index.ingest.defaults import ensure_gallery


def test_without_flickr8k_the_sample_gallery_is_built(tmp_path, parser):
    checkpoint = get_settings().default_checkpoint

    def start() -> str:
        return ensure_gallery(
            checkpoint, tmp_path / "index", parser, parser.cache_dir, tmp_path / "no-flickr8k"
        )

    served = start()
    assert "sample gallery" in served and "15 photos" in served
    assert "the gallery at" in start()  # kept as it is the second time
    # the photos live in the rebuildable cache: cleared, they come back at the next start
    photos = parser.cache_dir / "sample-data"
    shutil.rmtree(photos)
    start()
    assert len(list((photos / "Images").iterdir())) == 15


def test_serve_refuses_a_gallery_built_by_another_checkpoint(cli, service_gallery, tmp_path):
    index = tmp_path / "gallery"
    shutil.copytree(service_gallery, index)
    db = sqlite3.connect(index / "gallery.db")
    other = json.dumps({"checkpoint_sha256": "0" * 64})
    db.execute("UPDATE meta SET value = ? WHERE key = 'identity'", (other,))
    db.commit()
    db.close()
    res = cli("serve", "--index", str(index), "--port", "8999")
    assert res.returncode == 2
    assert "was built by" in res.stderr and "index the photos again" in res.stderr


def test_serve_refuses_a_short_write_token(cli, tmp_path):
    res = cli("serve", "--index", str(tmp_path), env_extra={"GROUNDSEARCH_WRITE_TOKEN": "abc"})
    assert res.returncode == 2 and "at least 16 characters" in res.stderr


def test_the_access_log_is_off_unless_asked_for(monkeypatch):
    from groundsearch.cli import build_parser
    from groundsearch.cli.serving import _logging

    def options(*argv: str) -> dict:
        return _logging(build_parser().parse_args(["serve", *argv]))

    monkeypatch.delenv("GROUNDSEARCH_ACCESS_LOG", raising=False)
    assert options() == {"log_level": "info", "access_log": False}
    assert options("--access-log", "--log-level", "warning") == {
        "log_level": "warning",
        "access_log": True,
    }
    monkeypatch.setenv("GROUNDSEARCH_ACCESS_LOG", "1")
    assert options()["access_log"] is True
    monkeypatch.setenv("GROUNDSEARCH_ACCESS_LOG", "true")
    assert options()["access_log"] is True
    monkeypatch.setenv("GROUNDSEARCH_ACCESS_LOG", "0")
    assert options()["access_log"] is False
