"""The install: one ``groundsearch`` namespace, every package listed, the artifacts in it."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_listed_under_its_namespace():
    setuptools = PYPROJECT["tool"]["setuptools"]
    folders = {name: ROOT / path for name, path in setuptools["package-dir"].items()}
    found = set()
    for name, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            found.add(".".join((name, *rel)))
    assert found == set(setuptools["packages"])
    assert all(p == "groundsearch" or p.startswith("groundsearch.") for p in found)


@pytest.mark.slow
def test_the_wheel_holds_only_the_groundsearch_namespace(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("groundsearch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {
        "groundsearch",
        wheel.name.split("-py")[0] + ".dist-info",
    }
    for shipped in (
        "groundsearch/model/artifacts/sdt-rnn.pt",
        "groundsearch/model/artifacts/stanza/depparse.pt",
        "groundsearch/index/ingest/sample_captions.txt",
        "groundsearch/service/http/static/index.html",
        "groundsearch/common/settings.py",
        "groundsearch/model/runtime/joint.py",
        "groundsearch/cli/__main__.py",
    ):
        assert shipped in names
