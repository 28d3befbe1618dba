"""The training and evaluation jobs behind ``groundsearch train`` and ``evaluate``; every
path comes in as an argument (nothing here reads the settings)."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from groundsearch.common.files import write_text
from groundsearch.model.data import load_captioned_images
from groundsearch.model.data.held_out_concepts import without_concepts
from groundsearch.model.data.sources import Source, load_source
from groundsearch.model.runtime.checkpoints import (
    CheckpointError,
    checkpoint_identity,
    load_checkpoint,
    load_joint,
    save_joint,
    save_kcca,
)
from groundsearch.model.runtime.concepts import ConceptConfig
from groundsearch.model.runtime.embedder import JointEmbedder
from groundsearch.model.runtime.ensemble import EnsembleEmbedder
from groundsearch.model.runtime.hubness import load_hubness
from groundsearch.model.runtime.images.backbones import DEFAULT_BACKBONE
from groundsearch.model.runtime.images.features import FeatureExtractor
from groundsearch.model.runtime.joint import JointConfig, JointModel, build_inventory
from groundsearch.model.runtime.kcca import KCCAModel
from groundsearch.model.runtime.parsing import Parser
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.runtime.sentences import Sentences
from groundsearch.model.runtime.text.glove import glove_vocabulary, load_glove
from groundsearch.model.runtime.text.vocab import Vocabulary
from groundsearch.model.training.corpus import (
    build_split,
    corpus_door,
    joined,
    named_trees,
    photo_features,
    text_trees,
)
from groundsearch.model.training.evaluation import protocol
from groundsearch.model.training.evaluation.arithmetic import (
    MIN_B_PHOTOS,
    MIN_STARTS,
    Pair,
    evaluate_arithmetic,
)
from groundsearch.model.training.evaluation.retrieval import paired_bootstrap, retrieval_metrics
from groundsearch.model.training.kcca import KCCAConfig, fit_kcca
from groundsearch.model.training.loop import TrainConfig, dev_score, fine_tune, train
from groundsearch.model.training.plots import plot_history
from groundsearch.model.training.teacher import teach


def run_training(
    sources: Sequence[Source],
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
    init: Path | None = None,
    teachers: Sequence[Path] = (),
) -> dict[str, Any]:
    """Train on the ``train`` splits of ``sources`` (mixed by weight), select on their
    ``dev`` splits; write the best model to ``out`` with its summary (``.json``) and curve
    (``.png``). ``hold_out``: concepts left out of ``train``; ``init``: a joint checkpoint
    to fine-tune; ``teachers``: checkpoints to distil from (``cfg.distill``)."""
    if bool(teachers) != bool(cfg.distill):
        raise ValueError("--teacher and --distill WEIGHT go together")
    for path in teachers:  # before the captions are parsed, not after
        if not Path(path).is_file():
            raise CheckpointError(f"teacher checkpoint not found: {path}")
    torch.manual_seed(cfg.seed)
    if init is not None:
        backbone = load_joint(init, parser=parser.version).backbone
    splits, extractor, prep_s = _train_and_dev(
        sources, parser, cache_dir, backbone, ten_crop, progress, hold_out
    )
    tr = splits["train"]
    if teachers:
        tr.teacher = teach(teachers, tr.trees, tr.features, parser.version, extractor.identity)
    inherited: dict[str, Any] = {}
    if init is None:
        vocab = glove_vocabulary(t.words for t in tr.trees)
        inventory = build_inventory(joint, tr.trees)
        model = JointModel(joint, vocab, inventory, parser.version, extractor.identity)
    else:
        model = with_words(load_joint(init, parser.version, extractor.identity), tr.trees)
        joint, inherited = model.config, model.extra
        if concepts is None and inherited.get("concepts"):
            concepts = ConceptConfig(**inherited["concepts"])
    fit = train if init is None else fine_tune
    hist = fit(model, tr, splits["dev"], cfg, progress=print if progress else None)
    dev = dev_score(model, splits["dev"], cfg.normalize)
    summary: dict[str, Any] = {
        "encoder": joint.encoder,
        "joint": joint.to_dict(),
        "train": asdict(cfg),
        "sources": [str(s) for s in sources],
        "init": str(init) if init is not None else None,
        "teachers": [str(t) for t in teachers],
        "dev": dev,
        "best_epoch": hist.best_epoch,
        "ensemble_dev_rsum": hist.ensemble_dev_rsum,
        "snapshot_dev_rsum": hist.snapshot_dev_rsum,
        "train_seconds": round(hist.seconds, 1),
        "prepare_seconds": round(prep_s, 1),
        "history": {
            "loss": hist.loss,
            "dev_rsum": hist.dev_rsum,
            "lr": hist.lr,
            "dev_rsum_by_source": hist.dev_sources,
        },
    }
    if hold_out:
        summary["held_out"] = {k: list(v) for k, v in hold_out.items()}
        summary["train_images"] = len(tr.features)
    if concepts is not None and concepts.weight > 0:
        summary["concepts"] = asdict(concepts)
    # the channel's trained words: in the checkpoint, not in the summary JSON
    counts = Counter(w.lower() for t in tr.trees for w in t.words)
    counts.update(inherited.get("word_counts") or {})
    save_joint(model, out, extra={**summary, "word_counts": dict(counts)}, half=half)
    _write_summary(out, summary)
    png = Path(out).with_suffix(".png")
    plot_history(summary["history"], png, joint.encoder, hist.best_epoch, hist.ensemble_dev_rsum)
    return summary


def with_words(model: JointModel, trees: Sequence[DependencyTree]) -> JointModel:
    """``model`` (and its snapshots) with a GloVe row for each word of ``trees`` it lacks."""
    new = glove_vocabulary(t.words for t in trees)
    known = set(model.vocab.words)
    glove_rows = {w for w in new.words if w not in known} & set(load_glove()[0])
    added = [i for i, w in enumerate(new.words) if w in glove_rows]
    if not added:
        return model
    vocab = Vocabulary(
        model.vocab.words + [new.words[i] for i in added],
        np.concatenate([model.vocab.vectors, new.vectors[added]]),
    )
    grown = JointModel(model.config, vocab, model.inventory, model.parser, model.backbone)
    fresh = grown.state_dict()

    def grow(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {  # the word table: its rows, then the new words' GloVe rows
            k: torch.cat([v, fresh[k][len(model.vocab) :]]) if v.shape != fresh[k].shape else v
            for k, v in state.items()
        }

    grown.load_state_dict(grow(model.state_dict()))
    grown.snapshots = [grow(snapshot) for snapshot in model.snapshots]
    grown.extra = model.extra
    return grown


def evaluate_checkpoint(
    checkpoint: Path,
    source: Source,
    parser: Parser,
    cache_dir: Path,
    benchmarks_dir: Path | None,
    split: str | None = "test",
    progress: bool = False,
    concept_weight: float | None = None,
    ensemble_with: Sequence[Path] = (),
    hubness: Path | None = None,
) -> dict[str, Any]:
    """The evaluation protocol (GUIDE §3) for a saved model on a split of ``source``
    (``benchmarks_dir`` None skips STS-B / SICK-R). ``concept_weight`` overrides the
    channel's; ``ensemble_with``: checkpoints averaged in; ``hubness``: as ``/search``."""
    hub = None if hubness is None else load_hubness(hubness, checkpoint_identity(checkpoint))
    load = partial(load_checkpoint, parser=parser.version, concept_weight=concept_weight)
    model: JointEmbedder | KCCAModel | EnsembleEmbedder = load(checkpoint)
    if ensemble_with:
        members = [model, *map(load, ensemble_with)]
        joint = [m for m in members if isinstance(m, JointEmbedder)]
        if len(joint) != len(members):
            raise CheckpointError("only joint models (not kCCA) can be ensembled")
        model = EnsembleEmbedder(joint)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=cache_dir)
    ds = load_source(source, split, extractor.identity)
    known = None if isinstance(model, KCCAModel) else model
    sp = build_split(ds, parser, extractor, progress, model=known)
    parse = text_trees(parser)
    result = {
        "checkpoint": str(checkpoint),
        "encoder": model.encoder,
        "concept_weight": concept_weight_of(model),
        "members": [str(checkpoint), *map(str, ensemble_with)] if ensemble_with else None,
        "data": str(source.path),
        "source": source.name,
        "split": split,
        "images": len(ds.images),
        "captions": len(ds.captions),
        "hubness": None if hubness is None else str(hubness),
        **protocol.split_metrics(model, sp.trees, sp.features, sp.caption_image, hubness=hub),
        "expert_spearman": protocol.expert_correlation(
            model, source.path, parse, extractor.embed_files
        )
        if source.kind == "flickr8k"
        else protocol.skipped(f"{source.name} has no expert judgments"),
    }
    if benchmarks_dir is not None:
        result.update(protocol.sentence_benchmarks(model, parse, benchmarks_dir))
    return result


def concept_weight_of(model: object) -> float:
    """The channel's weight in a model (an ensemble's first member's; 0 without)."""
    if isinstance(model, EnsembleEmbedder):
        model = model.members[0]
    channel = getattr(model, "concepts", None)
    return float(channel.config.weight) if channel is not None else 0.0


def compare_checkpoints(
    first: Path,
    second: Path,
    source: Source,
    parser: Parser,
    cache_dir: Path,
    split: str | None = "test",
    resamples: int = 1000,
    progress: bool = False,
    level: float = 0.95,
) -> dict[str, Any]:
    """Retrieval of two saved models on a split, and ``second − first`` (paired bootstrap,
    intervals at ``level``)."""
    models = [load_checkpoint(path, parser=parser.version) for path in (first, second)]
    ds = load_source(source, split, models[0].backbone)
    caption_image = np.asarray(ds.caption_image)
    scores, metrics = [], []
    for path, model in zip((first, second), models, strict=True):
        known = model if isinstance(model, JointEmbedder) else None
        trees = named_trees(corpus_door(parser, known), ds.captions)
        extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=cache_dir)
        features = photo_features(ds, extractor, progress)
        scores.append(model.embed_images(features) @ model.embed_sentences(trees).T)
        metrics.append({"checkpoint": str(path), "encoder": model.encoder})
        metrics[-1].update(retrieval_metrics(scores[-1], caption_image))
    return {
        "data": str(source.path),
        "source": source.name,
        "split": split,
        "images": len(ds.images),
        "captions": len(ds.captions),
        "first": metrics[0],
        "second": metrics[1],
        "second_minus_first": paired_bootstrap(
            scores[0], scores[1], caption_image, resamples=resamples, level=level
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
    """The arithmetic protocol (``evaluation.arithmetic``) on a Flickr8k-layout split."""
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
    sources: Sequence[Source],
    out: Path,
    cfg: KCCAConfig,
    parser: Parser,
    cache_dir: Path,
    backbone: str = DEFAULT_BACKBONE,
    ten_crop: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Fit the kCCA baseline, select it on dev; write it and its summary."""
    splits, extractor, prep_s = _train_and_dev(
        sources, parser, cache_dir, backbone, ten_crop, progress
    )
    tr = splits["train"]
    vocab = glove_vocabulary(t.words for t in tr.trees)
    t0 = time.perf_counter()
    log = partial(print, file=sys.stderr, flush=True) if progress else None
    model, dev, grid = fit_kcca(
        tr, splits["dev"], vocab, parser.version, extractor.identity, cfg, progress=log
    )
    summary: dict[str, Any] = {
        "encoder": "kcca",
        "kcca": asdict(cfg),
        "sources": [str(s) for s in sources],
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
    sources: Sequence[Source],
    parser: Parser,
    cache_dir: Path,
    backbone: str,
    ten_crop: bool,
    progress: bool,
    hold_out: Mapping[str, Collection[str]] | None = None,
) -> tuple[dict[str, Any], FeatureExtractor, float]:
    """The sources' train splits joined and dev splits by name, extractor and seconds."""
    if not sources:
        raise ValueError("no source to train on")
    names = [s.name for s in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"two sources share a name: {', '.join(names)}")
    extractor = FeatureExtractor(backbone, ten_crop=ten_crop, cache_dir=cache_dir)
    t0 = time.perf_counter()
    trains, devs = [], {}
    for source in sources:
        train_ds = load_source(source, "train", extractor.identity)
        if hold_out:
            train_ds = without_concepts(train_ds, hold_out)
        trains.append(build_split(train_ds, parser, extractor, progress))
        dev_ds = load_source(source, "dev", extractor.identity)
        devs[source.name] = build_split(dev_ds, parser, extractor, progress)
    splits = {"train": joined(trains, [s.weight for s in sources]), "dev": devs}
    return splits, extractor, time.perf_counter() - t0


def _write_summary(checkpoint: Path, summary: dict[str, Any]) -> None:
    """The run's summary as JSON beside its checkpoint (``.json``)."""
    write_text(Path(checkpoint).with_suffix(".json"), json.dumps(summary, indent=2) + "\n")
