"""``groundsearch evaluate-concepts``: the held-out-concept protocol and the sample check."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from groundsearch.cli.common import (
    CliError,
    checkpoint_argument,
    checkpoint_path,
    command,
    data_option,
    json_text,
    loaded_model,
    source_of,
    user_errors,
)
from groundsearch.common.settings import get_settings

COMMANDS = ("set-concepts", "evaluate-concepts")


def concept_weight(text: str) -> float:
    """``--concepts``: the open-vocabulary channel's weight, 0 (off) to 10."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= value <= 10.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 10, got {value}")
    return value


def held_out_names(text: str) -> list[str]:
    """``--hold-out``: comma-separated concept names, or ``default`` (the documented ten)."""
    from groundsearch.model.data.held_out_concepts import HELD_OUT

    names = list(HELD_OUT) if text.strip() == "default" else text.split(",")
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("name at least one concept, or 'default'")
    return names


#: ``--hold-out``'s help where the concepts' training photos are left out.
LEAVE_OUT = "leave out the training photos of these concepts (comma-separated, or 'default')"
#: ``--concepts``' help where the checkpoint's weight is the default.
CHANNEL = "the open-vocabulary channel's weight (0: off; default: the checkpoint's)"


def hold_out_option(p: argparse.ArgumentParser, help_text: str = LEAVE_OUT, **more: Any) -> None:
    """``--hold-out``: concept names (``held_out_names``)."""
    p.add_argument("--hold-out", type=held_out_names, help=help_text, **more)


def concepts_option(
    p: argparse.ArgumentParser, default: float | None = None, help_text: str = CHANNEL
) -> None:
    """``--concepts``: the channel's weight (``concept_weight``)."""
    p.add_argument("--concepts", type=concept_weight, default=default, help=help_text)


def cmd_evaluate_concepts(args: argparse.Namespace) -> int:
    from groundsearch.model.data import DatasetError, load_captioned_images
    from groundsearch.model.data.held_out_concepts import resolve
    from groundsearch.model.data.sources import load_source
    from groundsearch.model.runtime.checkpoints import CheckpointError, checkpoint_identity
    from groundsearch.model.runtime.hubness import HubnessError, load_hubness
    from groundsearch.model.runtime.images.photos import PhotoError
    from groundsearch.model.runtime.sentences import UnusableText
    from groundsearch.model.training.corpus import photo_features
    from groundsearch.model.training.evaluation.held_out import held_out_metrics, photo_best_words

    with user_errors(DatasetError, CheckpointError, UnusableText, PhotoError, HubnessError):
        concepts = resolve(args.hold_out)
        model, extractor, parse = loaded_model(args, args.concepts)
        hub = None
        if args.hubness:  # read before the split is embedded: a bad file fails at once
            hub = load_hubness(Path(args.hubness), checkpoint_identity(checkpoint_path(args)))
        channel = getattr(model, "concepts", None)
        result: dict[str, Any] = {
            "checkpoint": str(checkpoint_path(args)),
            "concept_weight": channel.config.weight if channel else 0.0,
        }
        if args.split:
            ds = load_source(source_of(args), args.split, extractor.identity)
            photos = model.embed_images(photo_features(ds, extractor))
            trees = parse(ds.captions)
            result["split"] = args.split
            penalty = None
            if hub is not None:
                penalty = hub.photo_penalties(photos)
                result["hubness"] = args.hubness
            result.update(
                held_out_metrics(model.embed_sentences, photos, ds, trees, parse, concepts, penalty)
            )
        if args.sample:
            from groundsearch.index.ingest.sample_gallery import prepare_sample_dataset

            root = prepare_sample_dataset(get_settings().cache_dir / "sample-data")
            sample = load_captioned_images(root)
            photos = model.embed_images(photo_features(sample, extractor))
            result["sample"] = photo_best_words(
                model.embed_sentences, photos, list(sample.images), parse
            )
    text = json_text(result)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


def cmd_set_concepts(args: argparse.Namespace) -> int:
    from groundsearch.model.runtime.checkpoints import (
        CheckpointError,
        checkpoint_identity,
        record_concepts,
    )

    given = dict(weight=args.concepts, names=args.names, halfway=args.halfway)
    given.update(rare=args.rare, tagger=args.tagger)
    changes: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    if not changes:
        raise CliError(
            "name a setting to change: --concepts, --names, --halfway, --rare or --tagger"
        )
    from groundsearch.model.runtime.captioning import DecoderError
    from groundsearch.model.runtime.captioning.artifact import read_decoder_state, restamp_decoder

    with user_errors(CheckpointError, DecoderError):
        old = checkpoint_identity(checkpoint_path(args))
        if args.decoder and read_decoder_state(Path(args.decoder))["joint"] != old:
            raise CliError(f"{args.decoder} was not made for {checkpoint_path(args)}")
        config = record_concepts(checkpoint_path(args), Path(args.out), **changes)
        if args.decoder:  # it reads the joint part, which the channel settings leave alone
            restamp_decoder(Path(args.decoder), checkpoint_identity(Path(args.out)))
    # the scores (and with --names or --concepts the photos' channel columns) change, and the
    # vector tagger and relevance are bound to the checkpoint they were fitted for
    out = Path(args.out)
    tagger = out.with_name(f"{out.stem}.vector_tagger.npz")
    refit = [
        f"groundsearch train-tagger --checkpoint {out} --on vectors --out {tagger}",
        f"groundsearch fit-relevance {out} --tagger {tagger} "
        f"--out {out.with_name(f'{out.stem}.relevance.json')}",
    ]
    print(json_text({"checkpoint": args.out, "concepts": vars(config), "refit": refit}))
    print(
        "the vector tagger and the relevance model were fitted for the old checkpoint "
        "(its scores and photo vectors): until they are fitted again for this one (the "
        "'refit' commands; `make refit CHECKPOINT=…` refits everything), a server on it "
        "judges relevance without them",
        file=sys.stderr,
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from groundsearch.model.runtime.concepts import CLASS_NAMES

    p = command(
        sub,
        "set-concepts",
        cmd_set_concepts,
        "a copy of a checkpoint with its concept channel's settings changed (weights as they are)",
    )
    checkpoint_argument(p, "a joint-model checkpoint (.pt)")
    p.add_argument("--out", required=True, help="where the copy goes")
    concepts_option(p, help_text="the channel's weight")
    p.add_argument(
        "--names",
        choices=CLASS_NAMES,
        default=None,
        help="what a class is called on the photo side (imagenet, entry: the everyday word)",
    )
    p.add_argument(
        "--halfway",
        type=float,
        default=None,
        help="the training count at which a noun's channel share is ½ (0: the step rule)",
    )
    p.add_argument(
        "--rare",
        type=int,
        default=None,
        help="a noun trained fewer times than this is new to the joint space (the step rule)",
    )
    p.add_argument(
        "--tagger",
        type=float,
        default=None,
        help="the word tagger's share of the photo side (0: the classifier's classes alone)",
    )
    p.add_argument(
        "--decoder",
        help="a caption decoder made for the checkpoint, re-stamped (in place) for the copy",
    )
    p = command(
        sub,
        "evaluate-concepts",
        cmd_evaluate_concepts,
        "held-out-concept retrieval (P@5, R@10) and the sample photos' best concept words",
    )
    checkpoint_argument(p, "a joint-model checkpoint (.pt)")
    data_option(p)
    p.add_argument("--split", default="test", help="the split to search ('' to skip)")
    hold_out_option(
        p,
        "the concepts asked for: comma-separated names or 'default'",
        default=held_out_names("default"),
    )
    concepts_option(p)
    p.add_argument("--sample", action="store_true", help="also score the shipped sample photos")
    p.add_argument(
        "--hubness",
        help="rank the split's photos as /search does, by this hubness file (chosen for "
        "the checkpoint: `groundsearch fit-hubness [--hold-out …]`); default: raw scores",
    )
    p.add_argument("--out", help="also write the JSON here")
