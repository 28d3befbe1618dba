"""Settings come from defaults with GROUNDSEARCH_* environment overrides."""

from __future__ import annotations

from pathlib import Path

from groundsearch.common.settings import Settings


def test_environment_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("GROUNDSEARCH_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GROUNDSEARCH_CACHE_DIR", str(tmp_path / "cache"))
    s = Settings()
    assert s.data_dir == tmp_path / "data"
    assert s.cache_dir == tmp_path / "cache"
    assert s.ewt_dir == tmp_path / "data" / "ud-english-ewt"


def test_default_model_dir_is_the_committed_one(monkeypatch):
    monkeypatch.delenv("GROUNDSEARCH_MODEL_DIR", raising=False)
    s = Settings()
    assert s.parser_dir == Path(__file__).resolve().parent.parent / "model/artifacts/stanza"
    assert (s.parser_dir / "manifest.json").exists()
