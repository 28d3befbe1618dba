"""Compact the trained stanza models for committing, and record what they are.

Floating-point weights are stored as float16 (stanza casts them back); ``manifest.json``
records each file's digest, the pretrain it expects and each stage's training time.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from groundsearch.common.files import torch_read, torch_save, write_text
from groundsearch.model.runtime.parsing.parser import MODEL_FILES
from groundsearch.model.runtime.parsing.pretrain import PRETRAIN_NAME, file_digest
from groundsearch.model.runtime.text.glove import GLOVE_PACKAGE


def _half(obj: object) -> object:
    if isinstance(obj, torch.Tensor) and obj.dtype == torch.float32:
        return obj.to(torch.float16)
    if isinstance(obj, dict):
        return type(obj)((k, _half(v)) for k, v in obj.items())
    return obj


def compact_models(parser_dir: Path) -> dict[str, tuple[int, int]]:
    """Store each model's float32 weights as float16; return sizes before and after."""
    sizes = {}
    for name, fname in MODEL_FILES.items():
        path = parser_dir / fname
        if not path.exists():
            continue
        before = path.stat().st_size
        data = torch_read(path, "stanza model", ValueError)
        if isinstance(data, dict) and "model" in data:
            data["model"] = _half(data["model"])
            torch_save(data, path)
        sizes[name] = (before, path.stat().st_size)
    return sizes


def write_manifest(parser_dir: Path, times_log: Path | None = None) -> Path:
    """Write manifest.json: file digests, pretrain identity and training wall times."""
    import stanza

    files = {
        n: file_digest(parser_dir / f) for n, f in MODEL_FILES.items() if (parser_dir / f).exists()
    }
    manifest: dict[str, object] = {
        "stanza": stanza.__version__,
        "treebank": "UD_English-EWT v2.16",
        "pretrain": {"package": GLOVE_PACKAGE, "file": PRETRAIN_NAME},
        "files": files,
        "bytes": {n: (parser_dir / MODEL_FILES[n]).stat().st_size for n in files},
    }
    path = parser_dir / "manifest.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    times = dict(old.get("train_seconds", {}))
    if times_log and times_log.exists():
        for line in times_log.read_text().splitlines():
            rec = json.loads(line)
            times[rec["stage"]] = rec["seconds"]
    manifest["train_seconds"] = times
    write_text(path, json.dumps(manifest, indent=2) + "\n")
    return path
