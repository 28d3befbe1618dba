"""``groundsearch features``, ``train``, ``evaluate``, ``plot`` and ``relations``."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from groundsearch.cli.common import (
    CliError,
    add_config_flags,
    checkpoint_argument,
    checkpoint_path,
    command,
    config_from,
    data_option,
    given_settings,
    json_text,
    make_parser,
    positive_int,
    source_of,
    sources_of,
    user_errors,
)
from groundsearch.cli.concepts import concepts_option, hold_out_option
from groundsearch.common.settings import get_settings

if TYPE_CHECKING:
    from groundsearch.model.data.sources import Source
    from groundsearch.model.training.loop import TrainConfig

#: What ``train`` learns from when no --source is named: both collections of the data folder.
TRAIN_SOURCES = ("flickr8k", "cc-web")
#: The weight ``train --init`` mixes them in with when only your collections are named
#: (each of their captions drawn 0.3 times an epoch), so the model forgets nothing.
FINE_TUNE_MIX = 0.3

COMMANDS = ("features", "train", "evaluate", "compare", "plot", "relations")


def cmd_features(args: argparse.Namespace) -> int:
    from groundsearch.model.data import DatasetError
    from groundsearch.model.data.sources import load_source
    from groundsearch.model.runtime.images.backbones import BackboneError
    from groundsearch.model.runtime.images.features import FeatureExtractor
    from groundsearch.model.runtime.images.photos import PhotoError
    from groundsearch.model.training.corpus import photo_features

    with user_errors(DatasetError, BackboneError, PhotoError):
        source = source_of(args)
        if source.kind == "features":
            raise CliError(f"{source.name} gives its photos as features already")
        ds = load_source(source, args.split or None)
        extractor = FeatureExtractor(
            args.backbone, ten_crop=args.ten_crop, cache_dir=get_settings().cache_dir
        )
        start = time.perf_counter()
        feats = photo_features(ds, extractor, progress=True)
    summary = {
        "images": len(feats),
        "dim": int(feats.shape[1]),
        "backbone": extractor.identity,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(summary))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from groundsearch.model.data import DatasetError
    from groundsearch.model.data.held_out_concepts import resolve
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.concepts import ConceptConfig
    from groundsearch.model.runtime.encoders.registry import encoder_options
    from groundsearch.model.runtime.joint import JointConfig
    from groundsearch.model.training.experiment import run_kcca_training, run_training
    from groundsearch.model.training.kcca import KCCAConfig
    from groundsearch.model.training.loop import TrainConfig

    sources = sources_of(args)
    if args.init and args.encoder == "kcca":
        raise CliError("--init goes on training a joint model; kcca is fitted afresh")
    common = {
        "parser": make_parser(),
        "cache_dir": get_settings().cache_dir,
        "backbone": args.backbone,
        "ten_crop": args.ten_crop,
    }
    with user_errors(DatasetError, CheckpointError, ValueError):
        if args.encoder == "kcca":
            kcca = config_from(args, KCCAConfig)
            summary = run_kcca_training(sources, Path(args.out), kcca, **common)
            keys = ("encoder", "selected", "dev", "train_seconds")
        else:
            options = encoder_options(args.encoder, vars(args))
            joint = config_from(args, JointConfig, options=options)
            cfg = config_from(args, TrainConfig)
            if args.init:
                cfg, sources = _fine_tuning(args, sources)
            summary = run_training(
                sources,
                Path(args.out),
                joint,
                cfg,
                half=args.half,
                hold_out=resolve(args.hold_out) if args.hold_out else None,
                concepts=ConceptConfig(weight=args.concepts) if args.concepts else None,
                init=Path(args.init) if args.init else None,
                teachers=[Path(t) for t in args.teacher or ()],
                **common,
            )
            keys = ("encoder", "dev", "best_epoch", "train_seconds")
    print(json_text({k: summary[k] for k in keys}))
    return 0


def _fine_tuning(
    args: argparse.Namespace, sources: list[Source]
) -> tuple[TrainConfig, list[Source]]:
    """``train --init``'s recipe and collections: the checkpoint's own recipe on the
    fine-tuning schedule (``loop.fine_tune_config``) under the flags given, and the
    data folder's collections mixed in at ``--mix`` when none of them is named."""
    from groundsearch.model.data.sources import NAMED, parse_source
    from groundsearch.model.runtime.checkpoints import load_joint
    from groundsearch.model.training.loop import TrainConfig, fine_tune_config

    recipe = load_joint(Path(args.init)).extra.get("train") or {}
    cfg = fine_tune_config(recipe, given_settings(args, TrainConfig))
    data_dir = get_settings().data_dir
    if args.mix < 0:
        raise CliError(f"--mix is a weight of 0 or more, not {args.mix:g}")
    if not args.mix or any(s.name in TRAIN_SOURCES for s in sources):
        return cfg, sources
    mixed = [
        parse_source(f"{name}={args.mix:g}", data_dir)
        for name in TRAIN_SOURCES
        if (data_dir / NAMED[name]).exists()
    ]
    return cfg, [*sources, *mixed]


def cmd_evaluate(args: argparse.Namespace) -> int:
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.hubness import HubnessError
    from groundsearch.model.runtime.sentences import UnusableText
    from groundsearch.model.training.experiment import evaluate_checkpoint

    s = get_settings()
    with user_errors(DatasetError, CheckpointError, UnusableText, HubnessError):
        result = evaluate_checkpoint(
            checkpoint_path(args),
            source_of(args),
            make_parser(),
            s.cache_dir,
            None if args.no_sentence_benchmarks else s.data_dir,
            split=args.split or None,
            progress=True,
            concept_weight=args.concepts,
            ensemble_with=[Path(p) for p in args.with_ or ()],
            hubness=Path(args.hubness) if args.hubness else None,
        )
    print(json_text(result))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.sentences import UnusableText
    from groundsearch.model.training.experiment import compare_checkpoints

    with user_errors(DatasetError, CheckpointError, UnusableText, ValueError):
        result = compare_checkpoints(
            Path(args.first),
            Path(args.second),
            source_of(args),
            make_parser(),
            get_settings().cache_dir,
            split=args.split or None,
            resamples=args.resamples,
            progress=True,
        )
    print(json_text(result))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from groundsearch.model.training.plots import SummaryError, load_summary, plot_history

    src = Path(args.summary)
    out = Path(args.out) if args.out else src.with_suffix(".png")
    if out.resolve() == src.resolve():
        raise CliError(f"--out {out} would overwrite the summary itself")
    with user_errors(SummaryError):
        summary = load_summary(src)
        best, ensemble = summary.get("best_epoch"), summary.get("ensemble_dev_rsum")
        title = f"{summary.get('encoder', 'model')}: {src.stem}"
        best = best if isinstance(best, int) else None
        ensemble = ensemble if isinstance(ensemble, int | float) else None
        plot_history(summary["history"], out, title, best, ensemble)
    print(out)
    return 0


def cmd_relations(args: argparse.Namespace) -> int:
    from groundsearch.model.runtime.checkpoints import CheckpointError, load_joint
    from groundsearch.model.training.analysis import format_ranking, identity_norm, relation_norms

    # No parser check: nothing is parsed here, only the stored matrices are read.
    path = checkpoint_path(args)
    with user_errors(CheckpointError):
        model = load_joint(path)
    try:
        ranking = relation_norms(model)
    except ValueError as exc:
        raise CliError(f"{path}: {exc}") from None
    shown = ranking[: args.top] if args.top else ranking
    if not args.markdown:
        print(
            f"# {len(ranking)} relation matrices, largest Frobenius norm first "
            f"(identity: {identity_norm(model):.3f})"
        )
    print(format_ranking(shown, markdown=args.markdown))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from groundsearch.model.runtime.encoders.registry import OPTIONS
    from groundsearch.model.runtime.images.backbones import DEFAULT_BACKBONE
    from groundsearch.model.runtime.joint import ENCODERS, JointConfig
    from groundsearch.model.training.kcca import KCCAConfig
    from groundsearch.model.training.loop import TrainConfig

    p = command(sub, "features", cmd_features, "extract (and cache) image features of a dataset")
    data_option(p)
    p.add_argument("--split", help="train, dev, test or a file of image names")
    _image_options(p, DEFAULT_BACKBONE)

    p = command(sub, "train", cmd_train, "train a joint model (Eq. 5), select on dev rsum")
    data_option(p, many=True, default=",".join(TRAIN_SOURCES))
    p.add_argument("--out", required=True, help="checkpoint to write (.pt)")
    p.add_argument(
        "--init",
        metavar="CHECKPOINT",
        help="fine-tune this joint checkpoint (new captions' words added): its own recipe "
        "for 6 epochs at a quarter of its step, kept as it was if no epoch beats it on dev, "
        "the data folder's collections mixed in (--mix); every flag overrides",
    )
    p.add_argument(
        "--mix",
        type=float,
        default=FINE_TUNE_MIX,
        metavar="W",
        help="with --init: the weight the data folder's collections are mixed in with when "
        f"--source names neither (0: your collections alone; default: {FINE_TUNE_MIX:g})",
    )
    p.add_argument(
        "--teacher",
        action="append",
        metavar="CHECKPOINT",
        help="a joint model whose scores the new one learns from (repeatable: the models' "
        "ensemble; with --distill WEIGHT)",
    )
    p.add_argument(
        "--encoder",
        default=JointConfig.encoder,
        choices=[*ENCODERS, "kcca"],
        help=f"a joint-model encoder, or kcca (default: {JointConfig.encoder})",
    )
    # image_dim is the backbone's; init_noise and adagrad_reset stay at their defaults
    add_config_flags(p, JointConfig, *OPTIONS, skip={"encoder", "seed", "image_dim", "init_noise"})
    add_config_flags(p, TrainConfig, skip={"adagrad_reset"})
    add_config_flags(p, KCCAConfig, skip={"seed"})
    p.add_argument("--half", action="store_true", help="store the weights as float16")
    hold_out_option(p)
    concepts_option(p, 0.0, "record the open-vocabulary channel with this weight (0: off)")
    _image_options(p, DEFAULT_BACKBONE)

    p = command(
        sub,
        "evaluate",
        cmd_evaluate,
        "retrieval, sentence similarity, expert, STS-B and SICK-R scores of a checkpoint",
    )
    checkpoint_argument(p, "a joint-model or kcca checkpoint (.pt)")
    data_option(p)
    p.add_argument("--split", default="test", help="train/dev/test, a list file, or ''")
    p.add_argument("--no-sentence-benchmarks", action="store_true", help="skip STS-B and SICK-R")
    concepts_option(p)
    p.add_argument(
        "--with",
        dest="with_",
        action="append",
        metavar="CHECKPOINT",
        help="score another joint checkpoint together with this one (repeatable)",
    )
    p.add_argument(
        "--hubness",
        help="rank image search as /search does, by this hubness file (chosen for the "
        "checkpoint: `groundsearch fit-hubness`; the shipped model's: "
        "model/artifacts/hubness.npz); default: raw scores",
    )

    p = command(
        sub,
        "compare",
        cmd_compare,
        "retrieval of two checkpoints on one split, SECOND − FIRST with paired bootstrap intervals",
    )
    p.add_argument("first", help="a joint-model or kcca checkpoint (.pt)")
    p.add_argument("second", help="another one, compared with the first")
    data_option(p)
    p.add_argument("--split", default="test", help="train/dev/test, a list file, or ''")
    p.add_argument("--resamples", type=positive_int, default=1000, help="bootstrap resamples")

    p = command(sub, "plot", cmd_plot, "PNG of the loss and dev rsum curves of a training run")
    p.add_argument("summary", help="training summary JSON (the .json beside a checkpoint)")
    p.add_argument("--out", help="PNG to write (default: the summary's name with .png)")

    p = command(sub, "relations", cmd_relations, "SDT-RNN relation matrices by Frobenius norm")
    checkpoint_argument(p, "an sdt-rnn checkpoint (.pt)")
    p.add_argument("--top", type=positive_int, help="show only the N largest")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")


def _image_options(p: argparse.ArgumentParser, default_backbone: str) -> None:
    """``--backbone`` and ``--ten-crop``: how photos become features."""
    p.add_argument("--backbone", default=default_backbone, help="an ImageNet CNN")
    p.add_argument("--ten-crop", action="store_true", help="average 10 crops")
