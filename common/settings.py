"""Project settings: where data, trained models and caches live.

Each field can be overridden by an environment variable with the ``GROUNDSEARCH_`` prefix
(``GROUNDSEARCH_DATA_DIR=/data``); the paths below them (``parser_dir``, ``gallery_dir``, …)
are derived properties. Only the roof (the command line, the service factory, the benchmark
scripts) reads them and hands paths down: code under ``model/`` and ``index/`` takes its
paths as arguments.
"""

from __future__ import annotations

import importlib.util
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from groundsearch.common import model_sets

REPO_ROOT = Path(__file__).resolve().parent.parent


def _default_model_dir() -> Path:
    """``artifacts/`` inside the installed ``groundsearch.model`` package (the repository's
    ``model/artifacts`` in an editable install)."""
    spec = importlib.util.find_spec("groundsearch.model")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the groundsearch.model package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "artifacts"


class Settings(BaseSettings):
    """Paths the project reads and writes."""

    model_config = SettingsConfigDict(env_prefix="GROUNDSEARCH_", extra="ignore")

    data_dir: Path = Field(
        default_factory=lambda: (REPO_ROOT.parent / "shared" / "data").resolve(),
        description="Read-only data sets.",
    )
    model_dir: Path = Field(
        default_factory=_default_model_dir,
        description="Trained artifacts the project loads by default.",
    )
    cache_dir: Path = Field(
        default_factory=lambda: Path.home() / ".cache" / "groundsearch",
        description="Rebuildable files: GloVe pretrain, parse cache, features.",
    )
    taught_dir: Path = Field(
        default_factory=lambda: Path.home() / ".local/share/groundsearch/taught",
        description="Model sets taught by `groundsearch teach`; the one it installed last "
        "is served (common.model_sets).",
    )
    objects_dir: Path = Field(
        default_factory=lambda: Path.home() / ".local/share/groundsearch/object-detector",
        description="The COCO object detector `groundsearch fetch-objects` installs from the "
        "npm registry (model.runtime.objects); without it short queries are ranked "
        "without its evidence.",
    )
    parse_pipeline: bool = Field(
        False,
        description="Parse every text with stanza.Pipeline instead of the direct path "
        "(docs/PARSER.md, 'The direct path': the same trees for 99.9 % of captions, "
        "faster); for comparisons.",
    )

    @property
    def parser_dir(self) -> Path:
        """Folder of the trained stanza English models."""
        return self.model_dir / "stanza"

    @cached_property
    def space_dir(self) -> Path:
        """The folder of the served joint model and the files fitted on its space: the
        taught set installed (``model_sets.current``) when these settings were first
        asked, else ``model_dir`` (a process keeps one model set while it runs)."""
        return model_sets.current(self.taught_dir) or self.model_dir

    @property
    def default_checkpoint(self) -> Path:
        """The SDT-RNN the service and ``groundsearch evaluate`` load by default."""
        return self.space_dir / model_sets.CHECKPOINT

    @property
    def default_decoder(self) -> Path:
        """The caption decoder trained on the default checkpoint's joint space."""
        return self.space_dir / "decoder.pt"

    def parser_options(self, use_cache: bool = True) -> dict[str, Any]:
        """The parser these settings name, as ``Parser(**settings.parser_options())``
        (``model.runtime.parsing``): the trained models, the parse cache (``use_cache``:
        read and write it) and the direct path unless ``parse_pipeline``."""
        return {
            "parser_dir": self.parser_dir,
            "cache_dir": self.cache_dir,
            "use_cache": use_cache,
            "direct": not self.parse_pipeline,
        }

    @property
    def gallery_dir(self) -> Path:
        """Where ``groundsearch index`` writes the gallery, and ``serve`` reads it, by
        default (``--index`` or ``GROUNDSEARCH_INDEX_DIR`` for the service name another)."""
        return self.cache_dir / "gallery"

    @property
    def flickr8k_dir(self) -> Path:
        """Flickr8k (Flickr8k layout: captions file, Images/, split lists): the dataset
        that training, evaluation and the default gallery read."""
        return self.data_dir / "flickr8k"

    @property
    def ewt_dir(self) -> Path:
        """UD English-EWT, the treebank the parser is trained on."""
        return self.data_dir / "ud-english-ewt"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once from the environment)."""
    return Settings()
