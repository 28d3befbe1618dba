"""Taught model sets: a joint checkpoint with the files fitted on its space, served as one.

``groundsearch teach`` writes a set (checkpoint, decoder, taggers, hubness, fusion,
relevance and ``teach.json``) into its own folder under ``Settings.taught_dir``;
``install`` points the ``current`` file at it, ``restore`` removes the pointer.
"""

from __future__ import annotations

import os
from pathlib import Path

from groundsearch.common.files import write_text

#: The joint checkpoint's name in a set (and in the shipped model folder).
CHECKPOINT = "sdt-rnn.pt"
#: The file naming the set served.
CURRENT = "current"
#: The record of how a set was taught.
RECORD = "teach.json"


def current(taught_dir: Path) -> Path | None:
    """The installed set's folder (None: none is installed, or it lost its checkpoint)."""
    try:
        name = (Path(taught_dir) / CURRENT).read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    folder = Path(taught_dir) / name
    return folder if name and "/" not in name and (folder / CHECKPOINT).is_file() else None


def check_name(taught_dir: Path, name: str) -> None:
    """ValueError unless ``name`` is a plain folder name no set of ``taught_dir`` has."""
    if not name or name != Path(name).name or name.startswith(".") or name == CURRENT:
        raise ValueError(f"a model set's name is a plain folder name, not {name!r}")
    if (Path(taught_dir) / name).exists():
        raise ValueError(f"a model set named {name!r} exists already in {taught_dir}")


def install(taught_dir: Path, staged: Path, name: str) -> Path:
    """Move the set written in ``staged`` (inside ``taught_dir``) to ``name`` and serve it
    (the pointer is replaced atomically)."""
    check_name(taught_dir, name)
    target = Path(taught_dir) / name
    os.replace(staged, target)
    write_text(Path(taught_dir) / CURRENT, name + "\n")
    return target


def restore(taught_dir: Path) -> bool:
    """Serve the shipped model again (the sets stay on disk); whether one was served."""
    try:
        (Path(taught_dir) / CURRENT).unlink()
    except FileNotFoundError:
        return False
    return True
