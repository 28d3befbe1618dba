"""Crash-safe, reproducible file writing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from groundsearch.common.files import atomic_path, torch_save, write_text


def test_failed_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "index.bin"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        Path(tmp).write_text("half")
        raise RuntimeError("crash in the middle of a write")
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_torch_save_is_byte_for_byte_reproducible(tmp_path):
    obj = {"w": torch.arange(10.0), "names": ["a", "b"]}
    torch_save(obj, tmp_path / "a.pt")
    torch_save(obj, tmp_path / "b.pt")
    assert (tmp_path / "a.pt").read_bytes() == (tmp_path / "b.pt").read_bytes()
    assert torch.equal(torch.load(tmp_path / "a.pt")["w"], obj["w"])


def test_written_files_are_readable_by_other_users(tmp_path):
    target = tmp_path / "model.bin"
    with atomic_path(target) as tmp:
        Path(tmp).write_bytes(b"weights")
    assert target.stat().st_mode & 0o777 == 0o644


def test_write_text_replaces_the_whole_file(tmp_path):
    target = tmp_path / "sub" / "summary.json"
    write_text(target, "a long first version\n")
    write_text(target, "short\n")
    assert target.read_text(encoding="utf-8") == "short\n"
    assert [p.name for p in target.parent.iterdir()] == ["summary.json"]  # no temp file left
