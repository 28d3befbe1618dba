"""Fit a joint model with the ranking objective (Eq. 5), selecting on dev rsum.

Recipes: ``adagrad`` (the paper's, its sums reset every ``adagrad_reset`` epochs) and
``adam-cyclic`` (a cosine cyclic rate, a snapshot per cycle; with ``ensemble`` the
snapshots become members whose scores are averaged, Merkx & Frank 2019). With several
collections an epoch draws each caption its collection's weight W times (the fraction by
chance) and selection scores the mean of the collections' dev rsums, so each counts alike.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from groundsearch.model.runtime.joint import JointModel
from groundsearch.model.runtime.parsing.tree import DependencyTree
from groundsearch.model.training.evaluation.retrieval import retrieval_metrics
from groundsearch.model.training.losses import (
    LOSSES,
    contrastive_loss,
    distillation_loss,
    ranking_loss,
    squared_loss,
)
from groundsearch.model.training.phrases import fitting, photo_nouns, with_phrases
from groundsearch.model.training.teacher import Teacher

OPTIMIZERS = ("adagrad", "adam-cyclic")


def option(default: Any, help: str | None = None, **metadata: Any) -> Any:
    """A config field with what its command-line flag says (``cli.common.add_config_flags``:
    ``help``, and ``choices``, ``flag``, ``invert`` in ``metadata``)."""
    return field(default=default, metadata={"help": help, **metadata} if help else metadata)


@dataclass
class TrainConfig:
    """Optimisation settings (the model's architecture is in ``JointConfig``)."""

    epochs: int = 20
    batch_size: int = 100
    margin: float = option(3.0, "Δ of Eq. 5")
    hardest: bool = option(False, "hardest negative only (VSE++)")
    warmup: int = option(0, "with --hardest: epochs of all negatives first")
    loss: str = option(
        "margin",
        "margin: Eq. 5; contrastive: InfoNCE both ways at --temperature; "
        "squared: ‖v − y‖² of matched pairs (the paper's Table 2)",
        choices=LOSSES,
    )
    temperature: float = option(0.05, "τ of the contrastive loss (scores / τ)")
    distill: float = option(
        0.0,
        "weight of the teachers' scores of each batch (KL divergence of both "
        "directions' softmax at --distill-temperature; needs --teacher); 0: off",
    )
    distill_temperature: float = option(
        0.1, "τ of the distillation's softmax (scores / τ; chosen on the mixed dev)"
    )
    normalize: bool = option(False, "cosine instead of inner product")
    phrases: float = option(
        0.0,
        "draws per epoch of each caption's noun phrases in all ('a black dog': "
        "extra positives of its photo, model.training.phrases); 0: none",
    )
    optimizer: str = option("adagrad", choices=OPTIMIZERS)
    lr: float = 1e-2
    lr_min: float = option(0.0, "adam-cyclic: the lowest learning rate of a cycle")
    weight_decay: float = 0.0
    adagrad_reset: int = 5
    cycles: int = option(4, "adam-cyclic: LR cycles")
    ensemble: bool = option(False, "adam-cyclic: keep the cycle-end snapshots")
    ensemble_best: int = option(
        0, "with --ensemble: only the N snapshots of best dev rsum (0: all)"
    )
    seed: int = 0

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose adagrad or adam-cyclic")
        if self.epochs < 1 or self.batch_size < 2:
            raise ValueError("epochs must be ≥ 1 and batch_size ≥ 2")
        if self.ensemble and (self.optimizer != "adam-cyclic" or self.cycles < 2):
            raise ValueError("a snapshot ensemble needs --optimizer adam-cyclic and ≥ 2 cycles")
        if self.loss not in LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}; choose from {', '.join(LOSSES)}")
        for name in ("temperature", "distill_temperature"):
            if getattr(self, name) <= 0:
                raise ValueError(f"the {name} must be > 0, got {getattr(self, name)}")
        if self.distill < 0:
            raise ValueError(f"the distillation weight must be ≥ 0, got {self.distill}")
        if not 0 <= self.lr_min <= self.lr:
            raise ValueError(f"lr_min must be in [0, lr = {self.lr}], got {self.lr_min}")
        if self.ensemble_best < 0 or (self.ensemble_best and not self.ensemble):
            raise ValueError("--ensemble-best N needs --ensemble and N ≥ 1")
        if self.ensemble_best == 1:
            raise ValueError("--ensemble-best 1 is no ensemble: use at least 2")
        if self.phrases < 0:
            raise ValueError(f"--phrases must be ≥ 0, got {self.phrases}")
        if self.phrases and self.distill:
            raise ValueError("--phrases and --distill do not go together (no teacher scores)")


@dataclass
class Split:
    """Parsed captions and image features of one split (``caption_image[j]``: the row of
    ``features`` that caption ``j`` describes)."""

    trees: Sequence[DependencyTree]
    features: np.ndarray
    caption_image: np.ndarray
    rate: np.ndarray | None = None  # each caption's draws per epoch (None: 1 each)
    teacher: Teacher | None = None  # its captions and images in a teacher's space
    #: a noun phrase's noun ("" for a caption), and each photo's caption nouns
    phrase_nouns: np.ndarray | None = None
    photo_nouns: list[frozenset] | None = None

    def __post_init__(self) -> None:
        if len(self.trees) == 0 or len(self.features) == 0:
            raise ValueError("a split needs at least one caption and one image")
        if len(self.trees) != len(self.caption_image):
            raise ValueError(
                f"{len(self.trees)} captions but {len(self.caption_image)} caption→image links"
            )


@dataclass
class History:
    """What happened in training, epoch by epoch."""

    loss: list[float] = field(default_factory=list)
    dev_rsum: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    dev_sources: dict[str, list[float]] = field(default_factory=dict)
    best_epoch: int = 0
    ensemble_dev_rsum: float | None = None
    seconds: float = 0.0
    snapshots: list[dict] = field(default_factory=list, repr=False)
    snapshot_dev_rsum: list[float] = field(default_factory=list)


@torch.no_grad()
def embed_split(model: JointModel, split: Split, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Image and caption embeddings of a split (numpy)."""
    return (
        model.embed_images(split.features, normalize),
        model.embed_sentences(split.trees, normalize),
    )


def evaluate(model: JointModel, split: Split, normalize: bool) -> dict[str, Any]:
    """Retrieval metrics of a model on a split."""
    v, y = embed_split(model, split, normalize)
    return retrieval_metrics(v @ y.T, split.caption_image)


#: One dev split, or one per collection by name.
DevSet = Split | Mapping[str, Split]


def dev_score(model: JointModel, dev: DevSet, normalize: bool) -> dict[str, Any]:
    """``rsum``: the mean of each collection's dev rsum (one collection: its rsum);
    ``sources``: each collection's metrics by name."""
    devs = dev if isinstance(dev, Mapping) else {"dev": dev}
    sources = {name: evaluate(model, split, normalize) for name, split in devs.items()}
    rsum = float(np.mean([m["rsum"] for m in sources.values()]))
    return {"rsum": rsum, "sources": sources}


def epoch_order(rng: np.random.Generator, n: int, rate: np.ndarray | None) -> np.ndarray:
    """An epoch's captions in random order, each drawn by its rate (⌊r⌋ times, and once
    more with probability r − ⌊r⌋); all once when ``rate`` is None."""
    if rate is None:
        return rng.permutation(n)
    whole = np.floor(rate).astype(np.int64)
    draws = whole + (rng.random(n) < rate - whole)
    return rng.permutation(np.repeat(np.arange(n), draws))


def _optimizer(model: JointModel, cfg: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg.optimizer == "adagrad":
        return torch.optim.Adagrad(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)


def train(
    model: JointModel,
    train_split: Split,
    dev_split: DevSet,
    cfg: TrainConfig,
    progress: Callable[[str], None] | None = None,
) -> History:
    """Train in place; leaves ``model`` at its best dev-rsum state or, with ``cfg.ensemble``,
    its cycle-end snapshots as members when their ensemble beats that on dev."""
    if cfg.distill and train_split.teacher is None:
        raise ValueError("distillation (--distill) needs a teacher (--teacher CHECKPOINT)")
    if cfg.phrases and train_split.phrase_nouns is None:
        train_split = phrase_split(train_split, cfg.phrases)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    opt = _optimizer(model, cfg)
    n = len(train_split.trees)
    cycle_epochs = max(1, cfg.epochs // max(1, cfg.cycles))
    feats = torch.as_tensor(train_split.features, dtype=torch.float32)
    links = torch.as_tensor(train_split.caption_image)
    hist, best, best_state = History(), -1.0, None
    start = time.perf_counter()
    for epoch in range(1, cfg.epochs + 1):
        if cfg.optimizer == "adagrad" and epoch > 1 and (epoch - 1) % cfg.adagrad_reset == 0:
            opt = _optimizer(model, cfg)  # reset the squared-gradient sums
        model.train()
        order = epoch_order(rng, n, train_split.rate)
        steps_per_epoch = math.ceil(len(order) / cfg.batch_size)
        total = 0.0
        desc = f"epoch {epoch}/{cfg.epochs}"
        for b in tqdm(range(steps_per_epoch), desc=desc, leave=False, disable=progress is None):
            idx = order[b * cfg.batch_size : (b + 1) * cfg.batch_size]
            if len(idx) < 2:
                continue
            if cfg.optimizer == "adam-cyclic":
                phase = ((epoch - 1) % cycle_epochs + b / steps_per_epoch) / cycle_epochs
                lr = cfg.lr_min + 0.5 * (cfg.lr - cfg.lr_min) * (1 + math.cos(math.pi * phase))
                for group in opt.param_groups:
                    group["lr"] = lr
            y = model.encode_sentences([train_split.trees[i] for i in idx])
            image_rows = links[idx]
            v = model.encode_images(feats[image_rows])
            if cfg.normalize:
                y = torch.nn.functional.normalize(y, dim=1)
                v = torch.nn.functional.normalize(v, dim=1)
            if cfg.loss == "squared":
                loss = squared_loss(v, y) / len(idx)
            elif cfg.loss == "contrastive":
                loss = contrastive_loss(v, y, cfg.temperature, image_ids=image_rows) / len(idx)
            else:
                hardest = cfg.hardest and epoch > cfg.warmup
                fits = None
                if train_split.phrase_nouns is not None and train_split.photo_nouns:
                    nouns, photos = train_split.phrase_nouns[idx], train_split.photo_nouns
                    fits = torch.as_tensor(fitting(nouns, image_rows.numpy(), photos))
                loss = ranking_loss(v, y, cfg.margin, hardest, image_rows, fits) / len(idx)
            if cfg.distill and train_split.teacher is not None:
                teacher = train_split.teacher.scores(image_rows.numpy(), idx)
                taught = distillation_loss(v @ y.T, teacher, cfg.distill_temperature)
                loss = loss + cfg.distill * taught / len(idx)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        metrics = dev_score(model, dev_split, cfg.normalize)
        rsum = float(metrics["rsum"])
        hist.loss.append(total / max(1, len(order)))
        hist.dev_rsum.append(rsum)
        for name, m in metrics["sources"].items():
            hist.dev_sources.setdefault(name, []).append(float(m["rsum"]))
        hist.lr.append(opt.param_groups[0]["lr"])
        if cfg.optimizer == "adam-cyclic" and epoch % cycle_epochs == 0:
            hist.snapshots.append(copy.deepcopy(model.state_dict()))
            hist.snapshot_dev_rsum.append(rsum)
        if rsum > best:
            best, best_state, hist.best_epoch = rsum, copy.deepcopy(model.state_dict()), epoch
        if progress:
            each = ", ".join(f"{k} {m['rsum']:.1f}" for k, m in metrics["sources"].items())
            each = f" ({each})" if len(metrics["sources"]) > 1 else ""
            progress(
                f"epoch {epoch}/{cfg.epochs} loss {hist.loss[-1]:.4f} dev rsum {rsum:.1f}{each}"
            )
    hist.seconds = time.perf_counter() - start
    if best_state is not None:
        model.load_state_dict(best_state)
    if cfg.ensemble:
        model.snapshots = members = _best_snapshots(hist, cfg.ensemble_best)
        hist.ensemble_dev_rsum = float(dev_score(model, dev_split, cfg.normalize)["rsum"])
        if hist.ensemble_dev_rsum < best:  # selected on dev, like everything else
            model.snapshots = []
        if progress:
            kept = "kept" if model.snapshots else f"dropped: epoch {hist.best_epoch} is better"
            progress(
                f"snapshot ensemble of {len(members)}: dev rsum "
                f"{hist.ensemble_dev_rsum:.1f} ({kept})"
            )
    return hist


def phrase_split(split: Split, per_caption: float) -> Split:
    """``split`` with its captions' noun phrases (``model.training.phrases``)."""
    trees, links, rate, nouns = with_phrases(
        split.trees, split.caption_image, split.rate, per_caption
    )
    photos = photo_nouns(split.trees, split.caption_image)
    return Split(trees, split.features, links, rate, None, nouns, photos)


#: The schedule a fine-tune puts on the init checkpoint's own recipe (no warm-up,
#: teachers or ensemble of its own).
FINE_TUNE: dict[str, Any] = dict(
    epochs=6, cycles=3, warmup=0, distill=0.0, ensemble=False, ensemble_best=0, phrases=0.0
)
FINE_TUNE_STEP = 0.25


def fine_tune_config(recipe: Mapping[str, Any], given: Mapping[str, Any]) -> TrainConfig:
    """The fine-tuning recipe: the init checkpoint's own ``recipe`` on the ``FINE_TUNE``
    schedule, then every setting ``given`` on the command line."""
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    base = {k: v for k, v in recipe.items() if k in names} | FINE_TUNE
    base["lr"] = float(recipe.get("lr", TrainConfig.lr)) * FINE_TUNE_STEP
    return TrainConfig(**(base | {k: v for k, v in given.items() if k in names}))


def fine_tune(
    model: JointModel,
    train_split: Split,
    dev_split: DevSet,
    cfg: TrainConfig,
    progress: Callable[[str], None] | None = None,
) -> History:
    """Go on training a trained model in place: each member of its snapshot ensemble is
    trained by ``cfg`` and kept at its best dev epoch (or as it was), so the ensemble
    survives; ``hist`` is the first member's, with the ensemble's dev rsum."""
    start = time.perf_counter()
    single = dataclasses.replace(cfg, ensemble=False, ensemble_best=0)
    states, model.snapshots, tuned = model.snapshots or [model.state_dict()], [], []
    histories = []
    for i, state in enumerate(states, 1):
        if progress and len(states) > 1:
            progress(f"member {i}/{len(states)}")
        model.load_state_dict(state)
        initial = copy.deepcopy(model.state_dict())  # the model's own tensors train in place
        before = float(dev_score(model, dev_split, cfg.normalize)["rsum"])
        histories.append(train(model, train_split, dev_split, single, progress))
        if max(histories[-1].dev_rsum, default=before) <= before:  # no epoch beat it
            model.load_state_dict(initial)
            histories[-1].best_epoch = 0
            if progress:
                progress(f"no epoch beats the init's dev rsum {before:.1f}: kept as it was")
        tuned.append(copy.deepcopy(model.state_dict()))
    model.load_state_dict(tuned[0])
    hist = histories[0]
    if len(tuned) > 1:
        model.snapshots = tuned
        hist.ensemble_dev_rsum = float(dev_score(model, dev_split, cfg.normalize)["rsum"])
        hist.snapshot_dev_rsum = [max(h.dev_rsum) for h in histories]
        if progress:
            progress(f"{len(tuned)} members fine-tuned: dev rsum {hist.ensemble_dev_rsum:.1f}")
    hist.seconds = time.perf_counter() - start
    return hist


def _best_snapshots(hist: History, best: int) -> list[dict]:
    """The cycle-end snapshots of the ``best`` (0: all) highest dev rsum, in training order."""
    if not best:
        return hist.snapshots
    ranked = sorted(range(len(hist.snapshots)), key=lambda i: -hist.snapshot_dev_rsum[i])
    return [hist.snapshots[i] for i in sorted(ranked[:best])]
