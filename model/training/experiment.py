"""The training and evaluation jobs behind ``groundsearch train`` and ``evaluate``.

Every path comes in as an argument: the dataset, the parser (with its caches) and the
cache folder of image features; nothing here reads the settings.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from groundsearch.files import write_text
from groundsearch.model.data import load_captioned_images
from groundsearch.model.runtime.checkpoints import (
    JointEmbedder,
    load_checkpoint,
    save_joint,
    save_kcca,
)
from groundsearch.model.runtime.images.backbones import DEFAULT_BACKBONE
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.joint import JointConfig, JointModel, build_inventory
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.text.glove import glove_vocabulary
from groundsearch.model.training.corpus import build_split, load_splits
from groundsearch.model.training.evaluation import protocol
from groundsearch.model.training.kcca import KCCAConfig, fit_kcca
from groundsearch.model.training.loop import Split, TrainConfig, evaluate, train
from groundsearch.model.training.plots import plot_history


def run_training(
    data_root: Path,
    out: Path,
    joint: JointConfig,
    cfg: TrainConfig,
    parser: Parser,
    cache_dir: Path,
    backbone: str = DEFAULT_BACKBONE,
    ten_crop: bool = False,
    progress: bool = True,
    half: bool = False,
) -> dict[str, Any]:
    """Train on ``train``, select on ``dev``; write the best model to ``out``, its
    summary beside it (``.json``) and the training curve (``.png``)."""
    torch.manual_seed(cfg.seed)
    splits, extractor, prep_s = _train_and_dev(
        data_root, parser, cache_dir, backbone, ten_crop, progress
    )
    tr = splits["train"]
    vocab = glove_vocabulary(t.words for t in tr.trees)
    inventory = build_inventory(joint, tr.trees)
    model = JointModel(joint, vocab, inventory, parser.version, extractor.identity)
    hist = train(model, tr, splits["dev"], cfg, progress=print if progress else None)
    dev = evaluate(model, splits["dev"], cfg.normalize)
    summary: dict[str, Any] = {
        "encoder": joint.encoder,
        "joint": asdict(joint),
        "train": asdict(cfg),
        "dev": dev,
        "best_epoch": hist.best_epoch,
        "ensemble_dev_rsum": hist.ensemble_dev_rsum,
        "snapshot_dev_rsum": hist.snapshot_dev_rsum,
        "train_seconds": round(hist.seconds, 1),
        "prepare_seconds": round(prep_s, 1),
        "history": {"loss": hist.loss, "dev_rsum": hist.dev_rsum, "lr": hist.lr},
    }
    save_joint(model, out, extra=summary, half=half)
    _write_summary(out, summary)
    png = Path(out).with_suffix(".png")
    plot_history(summary["history"], png, joint.encoder, hist.best_epoch, hist.ensemble_dev_rsum)
    return summary


def evaluate_checkpoint(
    checkpoint: Path,
    data_root: Path,
    parser: Parser,
    cache_dir: Path,
    benchmarks_dir: Path | None,
    split: str | None = "test",
    progress: bool = False,
) -> dict[str, Any]:
    """The evaluation protocol (GUIDE §3) for a saved JointModel or kCCA on a
    Flickr8k-layout split: retrieval and sentence similarity on the split, the expert
    judgments of ``data_root`` when it has them, and STS-B / SICK-R test pairs from
    ``benchmarks_dir`` (the data folder; None skips them)."""
    model = load_checkpoint(checkpoint, parser=parser.version)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=cache_dir)
    ds = load_captioned_images(data_root, split=split)
    sp = build_split(ds, parser, extractor, progress)
    if isinstance(model, JointEmbedder):
        model.model.require_known_words(sp.trees)

    def parse(texts: list[str]) -> list[DependencyTree]:
        return parser.parse(texts, workers=os.cpu_count() or 1)

    result = {
        "checkpoint": str(checkpoint),
        "encoder": model.encoder,
        "data": str(data_root),
        "split": split,
        "images": len(ds.images),
        "captions": len(ds.captions),
        **protocol.split_metrics(model, sp.trees, sp.features, sp.caption_image),
        "expert_spearman": protocol.expert_correlation(
            model, data_root, parse, extractor.embed_files
        ),
    }
    if benchmarks_dir is not None:
        result.update(protocol.sentence_benchmarks(model, parse, benchmarks_dir))
    return result


def run_kcca_training(
    data_root: Path,
    out: Path,
    cfg: KCCAConfig,
    parser: Parser,
    cache_dir: Path,
    backbone: str = DEFAULT_BACKBONE,
    ten_crop: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Fit the kCCA baseline on ``train`` (mean GloVe vectors of the caption words vs
    image features), pick its size and regularisation on ``dev`` rsum; write it to
    ``out`` and its summary beside it (``.json``)."""
    splits, extractor, prep_s = _train_and_dev(
        data_root, parser, cache_dir, backbone, ten_crop, progress
    )
    tr = splits["train"]
    vocab = glove_vocabulary(t.words for t in tr.trees)
    t0 = time.perf_counter()
    model, dev, grid = fit_kcca(
        tr,
        splits["dev"],
        vocab,
        parser.version,
        extractor.identity,
        cfg,
        progress=_to_stderr if progress else None,
    )
    summary: dict[str, Any] = {
        "encoder": "kcca",
        "kcca": asdict(cfg),
        "backbone": extractor.identity,
        "selected": model.config,
        "dev": dev,
        "train_seconds": round(time.perf_counter() - t0, 1),
        "prepare_seconds": round(prep_s, 1),
        "grid": grid,
    }
    save_kcca(model, out, extra=summary)
    _write_summary(out, summary)
    return summary


def _train_and_dev(
    data_root: Path, parser: Parser, cache_dir: Path, backbone: str, ten_crop: bool, progress: bool
) -> tuple[dict[str, Split], FeatureExtractor, float]:
    """Parsed and embedded train and dev splits, the extractor that embedded them and the
    seconds it took."""
    extractor = FeatureExtractor(backbone, ten_crop=ten_crop, cache_dir=cache_dir)
    t0 = time.perf_counter()
    splits = load_splits(data_root, ["train", "dev"], parser, extractor, progress=progress)
    return splits, extractor, time.perf_counter() - t0


def _write_summary(checkpoint: Path, summary: dict[str, Any]) -> None:
    """The run's summary as JSON beside its checkpoint (``.json``)."""
    write_text(Path(checkpoint).with_suffix(".json"), json.dumps(summary, indent=2) + "\n")


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
