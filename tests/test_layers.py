"""The layers of docs/ARCHITECTURE.md, checked on the imports of every module.

Training may import the runtime, never the reverse; the service never imports training
code, and its core (service/core) no HTTP; nothing under model/ or index/ reads the
settings; the ground (common/) imports nothing of the project.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Folder → modules (dotted prefixes) it must not import.
FORBIDDEN = {
    "model/runtime": [
        "groundsearch.common.settings",
        "groundsearch.cli",
        "groundsearch.model.training",
        "groundsearch.model.data",
        "groundsearch.index",
        "groundsearch.service",
    ],
    "model/data": [
        "groundsearch.common.settings",
        "groundsearch.cli",
        "groundsearch.model.runtime",
    ],
    "model/training": [
        "groundsearch.common.settings",
        "groundsearch.cli",
        "groundsearch.index",
        "groundsearch.service",
    ],
    "index": [
        "groundsearch.common.settings",
        "groundsearch.cli",
        "groundsearch.model.training",
        "groundsearch.service",
    ],
    "service": ["groundsearch.cli", "groundsearch.model.training"],
    # the application core knows no HTTP: routes call it, never the reverse
    "service/core": ["groundsearch.service.http", "fastapi", "starlette"],
    # the ground stands on nothing of the project
    "common": [
        "groundsearch.cli",
        "groundsearch.client",
        "groundsearch.model",
        "groundsearch.index",
        "groundsearch.service",
    ],
}


def imported(path: Path) -> set[str]:
    """Every module a file imports (absolute imports; the project uses no relative ones)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            names.add(node.module or "")
    return names


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_layer_imports_one_above_it(folder):
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for name in imported(path):
            for prefix in FORBIDDEN[folder]:
                if name == prefix or name.startswith(prefix + "."):
                    bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_library_code_reads_no_groundsearch_variable():
    for folder in ("model", "index"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            assert "GROUNDSEARCH_" not in path.read_text(encoding="utf-8"), path


def test_no_old_top_level_imports_remain():
    for folder in ("groundsearch", "common", "model", "index", "service", "tests", "bench"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in imported(path):
                assert name.split(".")[0] not in {"model", "index", "service"}, (path, name)


def test_the_client_imports_nothing_of_the_project():
    """``groundsearch.client`` talks HTTP only: a program using it loads no model code."""
    names = imported(ROOT / "groundsearch" / "client.py")
    assert not [n for n in names if n.startswith("groundsearch")], names
