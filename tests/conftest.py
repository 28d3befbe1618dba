"""Shared fixtures: one parser for the session, with its cache in a temp folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from groundsearch.settings import get_settings


@pytest.fixture(scope="session")
def parser(tmp_path_factory: pytest.TempPathFactory):
    from model.parsing import Parser

    settings = get_settings()
    # The GloVe pretrain is shared (rebuilt from the package once); parses are not.
    cache = tmp_path_factory.mktemp("parse-cache")
    (cache / "glove6b50d.pretrain.pt").symlink_to(_pretrain(settings.cache_dir))
    return Parser(cache_dir=cache)


def _pretrain(cache_dir: Path) -> Path:
    from model.parsing.pretrain import ensure_pretrain

    return ensure_pretrain(cache_dir)


@pytest.fixture(scope="session")
def cli(tmp_path_factory: pytest.TempPathFactory):
    """Run ``groundsearch ARGS`` in a subprocess with its own cache folder."""
    cache = tmp_path_factory.mktemp("cli-cache")
    (cache / "glove6b50d.pretrain.pt").symlink_to(_pretrain(get_settings().cache_dir))
    env = {**os.environ, "GROUNDSEARCH_CACHE_DIR": str(cache)}

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "groundsearch.cli", *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=600,
        )

    return run
