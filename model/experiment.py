"""The training and evaluation jobs behind ``groundsearch train`` and ``evaluate``."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import torch

from groundsearch.settings import get_settings
from model.corpus import build_split, load_splits
from model.data import load_captioned_images
from model.images.features import FeatureExtractor
from model.joint import JointConfig, JointModel, build_inventory
from model.parsing import Parser
from model.text.glove import glove_vocabulary
from model.training import TrainConfig, evaluate, train


def run_training(
    data_root: Path,
    out: Path,
    joint: JointConfig,
    cfg: TrainConfig,
    backbone: str = "efficientnet-lite0",
    ten_crop: bool = False,
    progress: bool = True,
) -> dict[str, object]:
    """Train on ``train``, select on ``dev``, save the best model to ``out``."""
    settings = get_settings()
    torch.manual_seed(cfg.seed)
    parser = Parser()
    extractor = FeatureExtractor(backbone, ten_crop=ten_crop, cache_dir=settings.cache_dir)
    t0 = time.perf_counter()
    splits = load_splits(data_root, ["train", "dev"], parser, extractor, progress=progress)
    prep_s = time.perf_counter() - t0
    tr = splits["train"]
    vocab = glove_vocabulary(t.words for t in tr.trees)
    inventory = build_inventory(joint, tr.trees)
    model = JointModel(joint, vocab, inventory, parser.version, extractor.identity)
    hist = train(model, tr, splits["dev"], cfg, progress=print if progress else None)
    dev = evaluate(model, splits["dev"], cfg.normalize)
    summary = {
        "encoder": joint.encoder,
        "joint": asdict(joint),
        "train": asdict(cfg),
        "dev": dev,
        "best_epoch": hist.best_epoch,
        "train_seconds": round(hist.seconds, 1),
        "prepare_seconds": round(prep_s, 1),
        "history": {"loss": hist.loss, "dev_rsum": hist.dev_rsum, "lr": hist.lr},
    }
    model.save(out, extra=summary)
    Path(out).with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def evaluate_checkpoint(
    checkpoint: Path, data_root: Path, split: str | None = "test", progress: bool = False
) -> dict[str, object]:
    """Retrieval metrics of a saved model on a Flickr8k-layout dataset split."""
    settings = get_settings()
    parser = Parser()
    model = JointModel.load(checkpoint, parser=parser.version)
    name, ten_crop, _ = model.backbone.partition("-10crop")
    extractor = FeatureExtractor(name, ten_crop=bool(ten_crop), cache_dir=settings.cache_dir)
    ds = load_captioned_images(data_root, split=split)
    normalize = bool(getattr(model, "extra", {}).get("train", {}).get("normalize", False))
    metrics = evaluate(model, build_split(ds, parser, extractor, progress), normalize)
    return {
        "checkpoint": str(checkpoint),
        "data": str(data_root),
        "split": split,
        "images": len(ds.images),
        "captions": len(ds.captions),
        **metrics,
    }
