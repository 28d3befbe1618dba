"""Crash-safe file writing: write beside the target, then rename over it."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def atomic_path(path: Path) -> Iterator[str]:
    """Yield a temporary path in ``path``'s folder that replaces ``path`` on success (a
    crash leaves ``path`` as it was); world-readable (0644), for a service's other user."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def sync(path: Path | str) -> None:
    """``fsync`` a written file, so a rename after it never exposes a half-written one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes (hex), read in 1 MB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_text(path: Path, text: str) -> None:
    """Write a UTF-8 text file atomically (readers see the old or the new file, whole)."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


def write_json(path: Path, data: object) -> None:
    """Write ``data`` as indented JSON atomically."""
    write_text(Path(path), json.dumps(data, indent=1) + "\n")


def read_json(path: Path, what: str, error: type[Exception]) -> Any:
    """The JSON in ``path``; ``error`` ("cannot read <what> <path>: why") if missing or not JSON."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from None


def torch_save(obj: object, path: Path) -> None:
    """``torch.save`` atomically and reproducibly (through a file object the archive's
    root is ``archive``, not the random temporary name)."""
    import torch

    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        torch.save(obj, f)


def torch_read(path: Path, what: str, error: type[Exception], weights_only: bool = True) -> object:
    """``torch.load`` of a saved artifact onto the CPU; ``error`` when the file is missing
    ("<what> not found") or is not one ("<path> is not a <what> (why)")."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=weights_only)
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except Exception as exc:
        raise error(f"{path} is not a {what} ({exc})") from None
