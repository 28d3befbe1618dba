"""Shared fixtures: one parser for the session, with its cache in a temp folder.

Tests that start servers, browsers or subprocesses are marked ``slow`` (every test that
uses the ``cli`` fixture is marked here); ``pytest -m "not slow"`` leaves them out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from groundsearch.common.settings import get_settings

# Servers started by tests leave the caption bank out (embedding Flickr8k's 30,000
# training captions would run beside every test); tests/index/test_caption_bank.py
# names its own bank.
os.environ.setdefault("GROUNDSEARCH_CAPTION_BANK", "none")
# The shipped model, whatever `groundsearch teach` installed on this machine.
os.environ["GROUNDSEARCH_TAUGHT_DIR"] = str(Path(__file__).parent / "no-taught-models")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "cli" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def parser(tmp_path_factory: pytest.TempPathFactory):
    from groundsearch.model.runtime.parsing import Parser

    settings = get_settings()
    # The GloVe pretrain is shared (rebuilt from the package once); parses are not.
    cache = tmp_path_factory.mktemp("parse-cache")
    (cache / "glove6b50d.pretrain.pt").symlink_to(_pretrain(settings.cache_dir))
    return Parser(settings.parser_dir, cache)


def _pretrain(cache_dir: Path) -> Path:
    from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain

    return ensure_pretrain(cache_dir)


@pytest.fixture(scope="session")
def cli(tmp_path_factory: pytest.TempPathFactory):
    """Run ``groundsearch ARGS`` in a subprocess with its own cache folder."""
    cache = tmp_path_factory.mktemp("cli-cache")
    (cache / "glove6b50d.pretrain.pt").symlink_to(_pretrain(get_settings().cache_dir))
    env = {**os.environ, "GROUNDSEARCH_CACHE_DIR": str(cache)}

    def run(
        *args: str, stdin: str | None = None, env_extra: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "groundsearch.cli", *args],
            env={**env, **(env_extra or {})},
            input=stdin,
            capture_output=True,
            text=True,
            timeout=600,
        )

    return run


@pytest.fixture(scope="session")
def tiny_flickr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 train, 4 dev and 4 test Flickr8k photos with captions and the test photos'
    expert judgments (see ``tests/tiny_data.py``)."""
    from tests.tiny_data import make_tiny_flickr

    return make_tiny_flickr(tmp_path_factory.mktemp("tiny-flickr"), expert=True)


@pytest.fixture(scope="session")
def extractor(tmp_path_factory: pytest.TempPathFactory):
    """The default image backbone with its feature cache in a temp folder."""
    import torch

    from groundsearch.model.runtime.images.features import FeatureExtractor

    torch.set_num_threads(1)
    return FeatureExtractor(cache_dir=tmp_path_factory.mktemp("feature-cache"))


@pytest.fixture(scope="session")
def service_gallery(tmp_path_factory: pytest.TempPathFactory, parser) -> Path:
    """A gallery of 8 real Flickr8k test photos (40 captions) indexed with the shipped
    checkpoint by ``groundsearch index``'s own path; tests that write copy it first."""
    from groundsearch.index.ingest.defaults import flickr8k_preset, index_preset
    from tests.tiny_data import make_tiny_flickr

    root = make_tiny_flickr(tmp_path_factory.mktemp("service-data"), train=0, dev=0, test=8)
    out = tmp_path_factory.mktemp("service-gallery") / "gallery"
    index_preset(flickr8k_preset(root, None), out, get_settings().default_checkpoint, parser)
    return out


@pytest.fixture(scope="session")
def service_components(service_gallery: Path, parser, tmp_path_factory: pytest.TempPathFactory):
    """The service's components, loaded once (checkpoint, parser, backbone, gallery) over
    a copy of the service gallery, shared by the read-only API tests."""
    import shutil

    from groundsearch.service.core.components import Components
    from groundsearch.service.core.settings import ServiceSettings

    index = tmp_path_factory.mktemp("service-index") / "gallery"
    shutil.copytree(service_gallery, index)
    # parsed in this process (parser processes: tests/service/test_batching.py, test_page.py)
    settings = ServiceSettings(
        index_dir=index, cache_dir=parser.cache_dir, parse_workers=0, caption_bank="none"
    )
    return Components.load(settings, parser=parser)
