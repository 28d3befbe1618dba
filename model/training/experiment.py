"""The training and evaluation jobs behind ``groundsearch train`` and ``evaluate``.

Every path comes in as an argument: the dataset, the parser (with its caches) and the
cache folder of image features; nothing here reads the settings.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from groundsearch.files import write_text
from groundsearch.model.data import load_captioned_images
from groundsearch.model.data.concepts import without_concepts
from groundsearch.model.runtime.checkpoints import (
    CheckpointError,
    load_checkpoint,
    save_joint,
    save_kcca,
)
from groundsearch.model.runtime.concepts import ConceptConfig
from groundsearch.model.runtime.embedder import JointEmbedder
from groundsearch.model.runtime.ensemble import EnsembleEmbedder
from groundsearch.model.runtime.images.backbones import DEFAULT_BACKBONE
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.joint import JointConfig, JointModel, build_inventory
from groundsearch.model.runtime.kcca import KCCAModel
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.sentences import Sentences
from groundsearch.model.runtime.text.glove import glove_vocabulary
from groundsearch.model.training.corpus import build_split, corpus_door, named_trees, text_trees
from groundsearch.model.training.evaluation import protocol
from groundsearch.model.training.evaluation.arithmetic import (
    MIN_B_PHOTOS,
    MIN_STARTS,
    Pair,
    evaluate_arithmetic,
)
from groundsearch.model.training.evaluation.retrieval import paired_bootstrap, retrieval_metrics
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
    hold_out: Mapping[str, Collection[str]] | None = None,
    concepts: ConceptConfig | None = None,
) -> dict[str, Any]:
    """Train on ``train``, select on ``dev``; write the best model to ``out``, its
    summary beside it (``.json``) and the training curve (``.png``).

    ``hold_out``: concepts (name → word forms) whose photos are left out of ``train``.
    ``concepts``: the open-vocabulary channel recorded in the checkpoint (not trained).
    """
    torch.manual_seed(cfg.seed)
    splits, extractor, prep_s = _train_and_dev(
        data_root, parser, cache_dir, backbone, ten_crop, progress, hold_out
    )
    tr = splits["train"]
    vocab = glove_vocabulary(t.words for t in tr.trees)
    inventory = build_inventory(joint, tr.trees)
    model = JointModel(joint, vocab, inventory, parser.version, extractor.identity)
    hist = train(model, tr, splits["dev"], cfg, progress=print if progress else None)
    dev = evaluate(model, splits["dev"], cfg.normalize)
    summary: dict[str, Any] = {
        "encoder": joint.encoder,
        "joint": joint.to_dict(),
        "train": asdict(cfg),
        "dev": dev,
        "best_epoch": hist.best_epoch,
        "ensemble_dev_rsum": hist.ensemble_dev_rsum,
        "snapshot_dev_rsum": hist.snapshot_dev_rsum,
        "train_seconds": round(hist.seconds, 1),
        "prepare_seconds": round(prep_s, 1),
        "history": {"loss": hist.loss, "dev_rsum": hist.dev_rsum, "lr": hist.lr},
    }
    if hold_out:
        summary["held_out"] = {k: list(v) for k, v in hold_out.items()}
        summary["train_images"] = len(tr.features)
    if concepts is not None and concepts.weight > 0:
        summary["concepts"] = asdict(concepts)
    # the channel's notion of a trained word (model.runtime.concepts): kept in the
    # checkpoint, not in the summary JSON
    counts = Counter(w.lower() for t in tr.trees for w in t.words)
    save_joint(model, out, extra={**summary, "word_counts": dict(counts)}, half=half)
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
    concept_weight: float | None = None,
    ensemble_with: Sequence[Path] = (),
) -> dict[str, Any]:
    """The evaluation protocol (GUIDE §3) for a saved JointModel or kCCA on a
    Flickr8k-layout split: retrieval and sentence similarity on the split, the expert
    judgments of ``data_root`` when it has them, and STS-B / SICK-R test pairs from
    ``benchmarks_dir`` (the data folder; None skips them). ``concept_weight`` overrides
    the checkpoint's open-vocabulary channel (0: off); ``ensemble_with`` names more
    checkpoints scored together with it (the mean of their scores)."""
    model: JointEmbedder | KCCAModel | EnsembleEmbedder = load_checkpoint(
        checkpoint, parser=parser.version, concept_weight=concept_weight
    )
    if ensemble_with:
        members = [model] + [
            load_checkpoint(p, parser=parser.version, concept_weight=concept_weight)
            for p in ensemble_with
        ]
        joint = [m for m in members if isinstance(m, JointEmbedder)]
        if len(joint) != len(members):
            raise CheckpointError("only joint models (not kCCA) can be ensembled")
        model = EnsembleEmbedder(joint)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=cache_dir)
    ds = load_captioned_images(data_root, split=split)
    known = None if isinstance(model, KCCAModel) else model
    sp = build_split(ds, parser, extractor, progress, model=known)
    parse = text_trees(parser)
    result = {
        "checkpoint": str(checkpoint),
        "encoder": model.encoder,
        "concept_weight": concept_weight_of(model),
        "members": [str(checkpoint), *map(str, ensemble_with)] if ensemble_with else None,
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


def concept_weight_of(model: object) -> float:
    """The open-vocabulary channel's weight in a model (the first member's in an
    ensemble; 0 when there is none)."""
    if isinstance(model, EnsembleEmbedder):
        model = model.members[0]
    channel = getattr(model, "concepts", None)
    return float(channel.config.weight) if channel is not None else 0.0


def compare_checkpoints(
    first: Path,
    second: Path,
    data_root: Path,
    parser: Parser,
    cache_dir: Path,
    split: str | None = "test",
    resamples: int = 1000,
    progress: bool = False,
) -> dict[str, Any]:
    """Retrieval of two saved models on the same split, and ``second − first`` with
    paired bootstrap intervals over the split's photos (``retrieval.paired_bootstrap``)."""
    models = [load_checkpoint(path, parser=parser.version) for path in (first, second)]
    ds = load_captioned_images(data_root, split=split)
    caption_image = np.asarray(ds.caption_image)
    scores, metrics = [], []
    for path, model in zip((first, second), models, strict=True):
        known = model if isinstance(model, JointEmbedder) else None
        trees = named_trees(corpus_door(parser, known), ds.captions)
        extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=cache_dir)
        features = extractor.embed_files(
            [ds.image_path(i) for i in range(len(ds.images))], progress=progress
        )
        scores.append(model.embed_images(features) @ model.embed_sentences(trees).T)
        metrics.append({"checkpoint": str(path), "encoder": model.encoder})
        metrics[-1].update(retrieval_metrics(scores[-1], caption_image))
    return {
        "data": str(data_root),
        "split": split,
        "images": len(ds.images),
        "captions": len(ds.captions),
        "first": metrics[0],
        "second": metrics[1],
        "second_minus_first": paired_bootstrap(
            scores[0], scores[1], caption_image, resamples=resamples
        ),
    }


def evaluate_arithmetic_checkpoint(
    checkpoint: Path,
    data_root: Path,
    parser: Parser,
    cache_dir: Path,
    pairs: list[Pair],
    split: str | None = "test",
    k: int = 5,
    rerank: bool = False,
    examples: int = 0,
    min_starts: int = MIN_STARTS,
    min_b_photos: int = MIN_B_PHOTOS,
    progress: bool = False,
) -> dict[str, Any]:
    """The arithmetic protocol (``evaluation.arithmetic``) for a saved model on a
    Flickr8k-layout split: its photos are the gallery, its captions say what they show."""
    model = load_checkpoint(checkpoint, parser=parser.version)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=cache_dir)
    ds = load_captioned_images(data_root, split=split)
    sp = build_split(ds, parser, extractor, progress)
    door = Sentences(model if isinstance(model, JointEmbedder) else None, parser.parse)
    words = sorted({c.text for p in pairs for c in (p.a, p.b)})
    door.trees(words, [f"concept {word!r}" for word in words])  # each must be known

    def embed_texts(texts: list[str]) -> np.ndarray:
        return model.embed_sentences(door.trees(texts))

    result = evaluate_arithmetic(
        model.embed_images(sp.features), sp.trees, sp.caption_image, embed_texts, pairs,
        k=k, rerank=rerank, examples=examples, names=list(ds.images), features=sp.features,
        min_starts=min_starts, min_b_photos=min_b_photos,
        channel_columns=getattr(model, "channel_columns", 0),
    )  # fmt: skip
    return {
        "checkpoint": str(checkpoint),
        "encoder": model.encoder,
        "data": str(data_root),
        "split": split,
        "captions": len(ds.captions),
        **result,
    }


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
    data_root: Path,
    parser: Parser,
    cache_dir: Path,
    backbone: str,
    ten_crop: bool,
    progress: bool,
    hold_out: Mapping[str, Collection[str]] | None = None,
) -> tuple[dict[str, Split], FeatureExtractor, float]:
    """Parsed and embedded train and dev splits (train less the photos of ``hold_out``
    concepts), the extractor that embedded them and the seconds it took."""
    extractor = FeatureExtractor(backbone, ten_crop=ten_crop, cache_dir=cache_dir)
    t0 = time.perf_counter()
    train_ds = load_captioned_images(data_root, split="train")
    if hold_out:
        train_ds = without_concepts(train_ds, hold_out)
    splits = {
        "train": build_split(train_ds, parser, extractor, progress),
        "dev": build_split(
            load_captioned_images(data_root, split="dev"), parser, extractor, progress
        ),
    }
    return splits, extractor, time.perf_counter() - t0


def _write_summary(checkpoint: Path, summary: dict[str, Any]) -> None:
    """The run's summary as JSON beside its checkpoint (``.json``)."""
    write_text(Path(checkpoint).with_suffix(".json"), json.dumps(summary, indent=2) + "\n")


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
