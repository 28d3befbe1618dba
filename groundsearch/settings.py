"""Project settings: where data, trained models and caches live.

Every field can be overridden by an environment variable with the ``GROUNDSEARCH_``
prefix, e.g. ``GROUNDSEARCH_DATA_DIR=/data groundsearch parse "..."``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parent.parent


def _default_data_dir() -> Path:
    return (REPO_ROOT.parent / "shared" / "data").resolve()


def _default_cache_dir() -> Path:
    return Path.home() / ".cache" / "groundsearch"


class Settings(BaseSettings):
    """Paths the project reads and writes."""

    model_config = SettingsConfigDict(env_prefix="GROUNDSEARCH_", extra="ignore")

    data_dir: Path = Field(default_factory=_default_data_dir, description="Read-only data sets.")
    model_dir: Path = Field(
        default=REPO_ROOT / "model" / "artifacts",
        description="Trained artifacts the project loads by default.",
    )
    cache_dir: Path = Field(
        default_factory=_default_cache_dir,
        description="Rebuildable files: GloVe pretrain, parse cache, features.",
    )

    @property
    def parser_dir(self) -> Path:
        """Folder of the trained stanza English models."""
        return self.model_dir / "stanza"

    @property
    def default_checkpoint(self) -> Path:
        """The SDT-RNN the service and ``groundsearch evaluate`` load by default."""
        return self.model_dir / "sdt-rnn.pt"

    @property
    def gallery_dir(self) -> Path:
        """Where ``groundsearch build-index`` writes the gallery by default."""
        return self.cache_dir / "gallery"

    @property
    def ewt_dir(self) -> Path:
        """UD English-EWT, the treebank the parser is trained on."""
        return self.data_dir / "ud-english-ewt"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once from the environment)."""
    return Settings()
