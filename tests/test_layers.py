"""The layers of docs/ARCHITECTURE.md, checked on the imports of every module.

Training may import the runtime, never the reverse; the service never imports training
code, and its core (service/core) no HTTP; nothing under model/ or index/ reads the
settings; the ground (common/) imports nothing of the project; index/'s own layers
import only their own or lower ones.
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


#: index/'s layers, lowest first: a module imports from its own layer or lower ones only.
#: A folder is named by itself, a top-level module by its name (``__init__``: the package).
INDEX_LAYERS = [
    ("__init__", "errors", "store"),  # the ground: records and files
    ("search",),  # FAISS indexes over the records
    ("filters",),  # searches narrowed by the photos' columns
    ("gallery", "hits", "photo_writes", "caption_bank"),  # the gallery and its types
    ("ranking", "ingest"),  # pages of a ranking; photos into a gallery
]
INDEX_LAYER = {part: n for n, layer in enumerate(INDEX_LAYERS) for part in layer}
INDEX_FILES = sorted((ROOT / "index").rglob("*.py"))


def imported(path: Path) -> set[str]:
    """Every module a file imports, anywhere in it (absolute imports; the project uses no
    relative ones); ``from a import b`` counts as ``a`` and ``a.b``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            names.add(node.module or "")
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
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


def index_part(name: str) -> str:
    """The part of index/ a dotted name under ``groundsearch.index`` lies in (a name the
    package itself holds, as ``groundsearch.index.StoreError``, is ``__init__``'s)."""
    first = name.split(".")[2] if name.count(".") >= 2 else "__init__"
    return first if first in INDEX_LAYER else "__init__"


def part_of(path: Path) -> str:
    """The part of index/ a file is: its folder, or its own name at the top."""
    return path.relative_to(ROOT / "index").parts[0].removesuffix(".py")


def test_every_index_module_has_a_layer():
    missing = sorted({part_of(path) for path in INDEX_FILES} - set(INDEX_LAYER))
    assert not missing, f"put these in INDEX_LAYERS: {missing}"


def test_no_index_layer_imports_one_above_it():
    """Every import counts: at the top, in a function, under ``TYPE_CHECKING``."""
    bad: dict[tuple[str, str], str] = {}  # (file, part above it) → the first such import
    for path in INDEX_FILES:
        for name in sorted(imported(path)):
            part = index_part(name)
            inside = name.split(".")[:2] == ["groundsearch", "index"]
            if inside and INDEX_LAYER[part] > INDEX_LAYER[part_of(path)]:
                bad.setdefault((str(path.relative_to(ROOT)), part), name)
    assert not bad, "\n".join(f"{file} imports {name}" for (file, _), name in bad.items())


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
