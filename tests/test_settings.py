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


def test_every_artifact_read_by_default_comes_from_the_model_dir(monkeypatch, tmp_path):
    """GROUNDSEARCH_MODEL_DIR moves the taggers and the tables with the checkpoint (a
    refit set evaluated beside the shipped one reads its own, not the committed ones)."""
    from groundsearch.model.runtime import evidence, tagger
    from groundsearch.model.runtime.captioning import entry_level

    monkeypatch.setenv("GROUNDSEARCH_MODEL_DIR", str(tmp_path))
    assert tagger.default_path() == tmp_path / tagger.FILE_NAME
    assert tagger.default_path(tagger.VECTORS_FILE_NAME) == tmp_path / "vector_tagger.npz"
    assert evidence.default_path() == tmp_path / "noun_classes.tsv"
    assert entry_level.default_path() == tmp_path / "entry_level.tsv"
    assert Settings().default_checkpoint == tmp_path / "sdt-rnn.pt"
