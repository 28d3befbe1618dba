"""The training and evaluation jobs behind ``groundsearch train`` and ``evaluate``."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from groundsearch.settings import get_settings
from model.baselines.kcca import KCCAConfig, fit_kcca
from model.checkpoints import JointEmbedder, load_checkpoint
from model.corpus import build_split, load_splits
from model.data import load_captioned_images
from model.evaluation import protocol
from model.images.features import FeatureExtractor
from model.joint import JointConfig, JointModel, build_inventory
from model.parsing import Parser
from model.parsing.tree import DependencyTree
from model.plots import plot_history
from model.text.glove import glove_vocabulary
from model.training import Split, TrainConfig, evaluate, train


def run_training(
    data_root: Path,
    out: Path,
    joint: JointConfig,
    cfg: TrainConfig,
    backbone: str = "efficientnet-lite0",
    ten_crop: bool = False,
    progress: bool = True,
    half: bool = False,
) -> dict[str, object]:
    """Train on ``train``, select on ``dev``; write the best model to ``out``, its
    summary beside it (``.json``) and the training curve (``.png``)."""
    torch.manual_seed(cfg.seed)
    splits, parser, extractor, prep_s = _train_and_dev(data_root, backbone, ten_crop, progress)
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
        "ensemble_dev_rsum": hist.ensemble_dev_rsum,
        "train_seconds": round(hist.seconds, 1),
        "prepare_seconds": round(prep_s, 1),
        "history": {"loss": hist.loss, "dev_rsum": hist.dev_rsum, "lr": hist.lr},
    }
    model.save(out, extra=summary, half=half)
    _write_summary(out, summary)
    png = Path(out).with_suffix(".png")
    plot_history(summary["history"], png, joint.encoder, hist.best_epoch, hist.ensemble_dev_rsum)
    return summary


def evaluate_checkpoint(
    checkpoint: Path,
    data_root: Path,
    split: str | None = "test",
    progress: bool = False,
    sentence_benchmarks: bool = True,
) -> dict[str, object]:
    """The evaluation protocol (GUIDE §3) for a saved JointModel or kCCA on a
    Flickr8k-layout split: retrieval and sentence similarity on the split, the expert
    judgments of ``data_root`` when it has them, and STS-B / SICK-R test pairs from the
    settings' data dir unless ``sentence_benchmarks`` is off."""
    settings = get_settings()
    parser = Parser()
    model = load_checkpoint(checkpoint, parser=parser.version)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=settings.cache_dir)
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
    if sentence_benchmarks:
        result.update(protocol.sentence_benchmarks(model, parse, settings.data_dir))
    return result


def run_kcca_training(
    data_root: Path,
    out: Path,
    cfg: KCCAConfig,
    backbone: str = "efficientnet-lite0",
    ten_crop: bool = False,
    progress: bool = True,
) -> dict[str, object]:
    """Fit the kCCA baseline on ``train`` (mean GloVe vectors of the caption words vs
    image features), pick its size and regularisation on ``dev`` rsum; write it to
    ``out`` and its summary beside it (``.json``)."""
    splits, parser, extractor, prep_s = _train_and_dev(data_root, backbone, ten_crop, progress)
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
    summary = {
        "encoder": "kcca",
        "kcca": asdict(cfg),
        "backbone": extractor.identity,
        "selected": model.config,
        "dev": dev,
        "train_seconds": round(time.perf_counter() - t0, 1),
        "prepare_seconds": round(prep_s, 1),
        "grid": grid,
    }
    model.save(out, extra=summary)
    _write_summary(out, summary)
    return summary


def _train_and_dev(
    data_root: Path, backbone: str, ten_crop: bool, progress: bool
) -> tuple[dict[str, Split], Parser, FeatureExtractor, float]:
    """Parsed and embedded train and dev splits, with the tools that made them and the
    seconds it took."""
    parser = Parser()
    extractor = FeatureExtractor(backbone, ten_crop=ten_crop, cache_dir=get_settings().cache_dir)
    t0 = time.perf_counter()
    splits = load_splits(data_root, ["train", "dev"], parser, extractor, progress=progress)
    return splits, parser, extractor, time.perf_counter() - t0


def _write_summary(checkpoint: Path, summary: dict[str, object]) -> None:
    """The run's summary as JSON beside its checkpoint (``.json``)."""
    Path(checkpoint).with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
