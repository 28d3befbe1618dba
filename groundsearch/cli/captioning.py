"""``groundsearch train-decoder``, ``evaluate-captions`` and ``train-tagger``: a caption
decoder on the joint space, trained and scored from a gallery's stored vectors or the
cached features (the data: ``model.training.caption_data``), and the word tagger."""

from __future__ import annotations

import argparse
import math
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groundsearch.cli.common import (
    CliError,
    add_config_flags,
    checkpoint_path,
    command,
    config_from,
    data_option,
    json_text,
    make_parser,
    non_negative,
    positive_int,
    probability,
    sources_of,
    user_errors,
)
from groundsearch.common.settings import get_settings

if TYPE_CHECKING:
    from groundsearch.index.store.export import ExportedVectors
    from groundsearch.model.training.caption_data import CaptionData, SplitVectors

COMMANDS = ("train-decoder", "evaluate-captions", "train-tagger")


def _threads(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)


def _split_vectors(
    args: argparse.Namespace, split: str, hold_out: list[str] | None = None, shares: bool = False
) -> SplitVectors:
    """A split of every ``--source`` (``CaptionData.split``) as the checkpoint's vectors:
    the gallery's stored ones (``--gallery``), or the backbone's features through it."""
    from groundsearch.index.errors import StoreError
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.checkpoints import CheckpointError, checkpoint_identity
    from groundsearch.model.training.captioning import CaptionSet

    if args.gallery is not None:  # a gallery holds Flickr8k's vectors unless told
        args.default_sources = "flickr8k"
    with user_errors(StoreError, DatasetError, CheckpointError):
        sources = sources_of(args)
        vectors_of = None
        if args.gallery is not None:
            if len(sources) > 1:
                raise CliError("--gallery holds one collection's vectors: name one --source")
            exported = _exported(args, checkpoint_identity(checkpoint_path(args)))

            def vectors_of(ds: Any, _: str) -> CaptionSet:
                v = exported.subset(ds.images)
                columns = (v.photo_vectors, v.caption_texts, v.caption_photo, v.caption_vectors)
                return CaptionSet(*columns, v.photo_names)

        return _data(args).split(sources, split or None, hold_out, shares, vectors_of)


_DATA: dict[tuple[str, int, int], CaptionData] = {}


def _data(args: argparse.Namespace) -> CaptionData:
    """The checkpoint's caption data, once per process and file (``teach``'s stages share it)."""
    from groundsearch.model.runtime.checkpoints import load_checkpoint
    from groundsearch.model.training.caption_data import CaptionData

    path = checkpoint_path(args)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _DATA:
        parser = make_parser()
        model = load_checkpoint(path, parser=parser.version)
        _DATA[key] = CaptionData(model, parser, get_settings().cache_dir)
    return _DATA[key]


_EXPORTS: dict[str, ExportedVectors] = {}


def _exported(args: argparse.Namespace, identity: dict[str, str]) -> ExportedVectors:
    from groundsearch.index.store.export import export_vectors

    key = str(Path(args.gallery).resolve())
    if key not in _EXPORTS:
        _EXPORTS[key] = export_vectors(Path(args.gallery), identity)
    return _EXPORTS[key]


def cmd_train_decoder(args: argparse.Namespace) -> int:
    from functools import partial

    from groundsearch.model.runtime.captioning import DecoderConfig, DecoderError, save_decoder
    from groundsearch.model.runtime.captioning.artifact import load_decoder
    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.training.captioning import DecoderTrainConfig, train_decoder
    from groundsearch.model.training.evaluation.captions import collection_ciders, evaluate_decoder

    _threads(args)
    with user_errors(ValueError, DecoderError):
        config = config_from(args, DecoderTrainConfig)
        arch = config_from(args, DecoderConfig)
        init = load_decoder(Path(args.init)) if args.init else None
    train = _split_vectors(args, "train", args.hold_out, shares=True)
    dev = _split_vectors(args, "dev")
    judge = partial(collection_ciders, groups=dev.groups()) if config.select == "cider" else None
    with user_errors(ValueError):
        decoder, summary = train_decoder(
            train.vectors, dev.vectors, config, arch, judge=judge, init=init
        )
    if args.dev_scores:
        scores = evaluate_decoder(
            decoder, dev.vectors.photo_vectors, dev.references, train.vectors.caption_texts,
            beam=3, meteor=False,
        )  # fmt: skip
        summary["dev_captions"] = {k: v for k, v in scores.items() if k != "sentences"}
        print(json_text(summary["dev_captions"]))
    checkpoint = checkpoint_path(args)
    extra = {
        "command": shlex.join(["groundsearch", *sys.argv[1:]]),
        "hold_out": args.hold_out,
        "init": args.init,
        "train_captions": len(train.vectors.caption_texts),
        "joint_checkpoint": checkpoint.name,
        "summary": summary,
    }
    out = Path(args.out)
    save_decoder(decoder, out, checkpoint_identity(checkpoint), extra)
    out.with_suffix(".json").write_text(json_text(extra, 4) + "\n")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


def cmd_evaluate_captions(args: argparse.Namespace) -> int:
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.captioning import DecoderError, load_decoder
    from groundsearch.model.runtime.checkpoints import CheckpointError, checkpoint_identity
    from groundsearch.model.training.caption_data import caption_queries
    from groundsearch.model.training.evaluation.captions import evaluate_decoder

    _threads(args)
    checkpoint = checkpoint_path(args)
    path = Path(args.decoder) if args.decoder else get_settings().default_decoder
    with user_errors(DecoderError, CheckpointError):
        decoder = load_decoder(path, identity=checkpoint_identity(checkpoint))
    test = _split_vectors(args, args.split)
    vectors, refs = test.vectors.photo_vectors, test.references
    if args.vectors == "captions":
        vectors, refs = caption_queries(test.vectors)
    constraints = _constraints(args, decoder) if args.novel else None
    data = _data(args)
    with user_errors(DatasetError):  # the copy share: against every train caption
        training = data.texts(sources_of(args), "train")
    result = evaluate_decoder(
        decoder, vectors, refs, training, embed_texts=data.embed_texts, beam=args.beam,
        reranked=args.rerank, constraints=constraints, length_penalty=args.length_penalty,
        repeat_penalty=args.repeat_penalty, no_repeat_ngram=args.no_repeat_ngram,
    )  # fmt: skip
    if args.novel:
        result["novel"] = {
            "threshold": args.novel_threshold,
            "count": args.novel_count,
            "constrained_photos": sum(bool(r) for r in constraints.rows) if constraints else 0,
        }
    from groundsearch.model.training.corpus import text_trees
    from groundsearch.model.training.evaluation.captions import main_noun_share

    first_refs = text_trees(make_parser())([r[0] for r in refs])
    result["main_noun"] = main_noun_share(result["sentences"], first_refs)
    if args.hold_out:
        from groundsearch.model.data.held_out_concepts import resolve
        from groundsearch.model.training.evaluation.captions import held_out_scores

        result["held_out"] = held_out_scores(result["sentences"], refs, resolve(args.hold_out))
    result = {"decoder": str(path), "split": args.split, "vectors": args.vectors, **result}
    sentences = result.pop("sentences")
    print(_table(result))
    if args.json:
        named = dict(zip(test.vectors.photo_names, sentences, strict=True))
        Path(args.json).write_text(json_text({**result, "sentences": named}, 3) + "\n")
    return 0


def _constraints(args: argparse.Namespace, decoder: Any) -> Any:
    """The classifier's confident words for each photo of the split (``--novel``)."""
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.captioning.novel import NovelWords

    if args.vectors == "captions":
        raise CliError("--novel reads photos: it cannot constrain sentences written for captions")
    import numpy as np

    data = _data(args)
    backbone = data.model.backbone
    with user_errors(DatasetError):
        collections = [data.collection(s, args.split or None) for s in sources_of(args)]
    novel = NovelWords.for_decoder(
        decoder,
        backbone,
        threshold=args.novel_threshold,
        count=args.novel_count,
        tagger=None if args.no_tagger else _tagger(args.tagger, backbone),
        tagger_threshold=args.tagger_threshold,
    )
    return novel.constraints(np.concatenate([data.features(ds) for ds in collections]))


def _tagger(path: str | None, backbone: str) -> Any:
    """The word tagger at ``path`` (default: the shipped one), for ``backbone``."""
    from groundsearch.model.runtime.tagger import TaggerError, WordTagger

    with user_errors(TaggerError):
        return WordTagger.load(Path(path) if path else None, backbone)


def cmd_train_tagger(args: argparse.Namespace) -> int:
    """Fit the word tagger on the training photos' features and caption nouns; report
    its dev mean average precision and the held-out concepts' (docs/RESULTS.md)."""
    from groundsearch.model.data import DatasetError
    from groundsearch.model.data.held_out_concepts import HELD_OUT
    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.tagger import vectors_identity
    from groundsearch.model.training.tagger import (
        choose_words,
        fit_tagger,
        label_matrix,
        mean_average_precision,
        tagger_split,
    )

    _threads(args)
    data = _data(args)
    backbone = data.model.backbone
    if args.on == "vectors":  # what a gallery stores: the checkpoint's photo vectors
        backbone = vectors_identity(checkpoint_identity(checkpoint_path(args)))
    with user_errors(DatasetError):
        sources = sources_of(args)
        split = {n: tagger_split(data, sources, n, args.on == "vectors") for n in ("train", "dev")}
    nouns, features, trees = split["train"]
    lemmas, words = choose_words(nouns, trees, args.least)
    if not words:
        raise CliError(f"no noun is used on {args.least} or more training photos")
    labels = label_matrix(nouns, lemmas)
    tagger = fit_tagger(features, labels, words, backbone, args.weight_decay, lemmas=lemmas)
    dev_nouns, dev_features, _ = split["dev"]
    dev_map = mean_average_precision(tagger, dev_features, label_matrix(dev_nouns, lemmas))
    held = [w for w in HELD_OUT if tagger.lemma_column(w) is not None]
    held_map = mean_average_precision(
        tagger.subset([tagger.words[tagger.lemma_column(w) or 0] for w in held]),
        dev_features,
        label_matrix(dev_nouns, held),
    )
    out = Path(args.out)
    tagger.save(out)
    print(
        f"wrote {out}: {len(words)} nouns (on ≥ {args.least} training photos), "
        f"dev mean AP {100 * dev_map:.1f}, the held-out concepts' {100 * held_map:.1f} "
        f"({', '.join(held)})"
    )
    return 0


def _table(result: dict[str, Any]) -> str:
    """The figures as a two-column table."""
    rows = [(k, result[k]) for k in ("BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR")]
    rows += [(k, result[k]) for k in ("CIDEr-D", "ROUGE-L", "copied_%", "distinct_%")]
    rows += [(f"retrieval {k}", v) for k, v in result.get("retrieval", {}).items()]
    if "main_noun" in result:
        rows += [("names main noun %", result["main_noun"]["named_%"])]
    rows += [("generate_seconds", result["generate_seconds"])]
    head = (
        f"# {result['photos']} {result['vectors']} of {result['split']!r}, beam {result['beam']}"
        f"{', re-ranked' if result['reranked'] else ''}: {result['decoder']}"
    )
    lines = [head] + [f"{k:<22} {'n/a' if v is None else f'{v:.2f}'}" for k, v in rows]
    if "novel" in result:
        n = result["novel"]
        lines += [
            f"novel words: threshold {n['threshold']}, count {n['count']}, "
            f"{n['constrained_photos']} photos constrained"
        ]
    if "held_out" in result:
        h = result["held_out"]
        on = h["on_held_out_photos"]
        lines += [
            f"held-out mention F1 (mean of {len(h['mention']['concepts'])}) "
            f"{h['mention']['mean_F1']:.2f}",
            f"held-out photos ({h['held_out_photos']}): METEOR "
            f"{'n/a' if on['METEOR'] is None else format(on['METEOR'], '.2f')}, "
            f"CIDEr-D {on['CIDEr-D']:.2f}, BLEU-4 {on['BLEU-4']:.2f}",
        ]
        lines += [
            f"  {name:<11} F1 {v['F1']:5.1f}  P {v['precision']:5.1f}  R {v['recall']:5.1f}  "
            f"({v['photos']} photos, said {v['said']})"
            for name, v in h["mention"]["concepts"].items()
        ]
    lines += [f"note: {n}" for n in result["notes"]]
    lines += ["examples:"] + [f"  {s}" for s in result["examples"]]
    return "\n".join(lines)


def _common(p: argparse.ArgumentParser, train: bool = False) -> None:
    p.add_argument(
        "--gallery",
        type=Path,
        help="a gallery of every Flickr8k photo by the same joint model "
        "(`groundsearch index --flickr8k --split '' --index DIR`); without it, photo "
        "vectors come from the cached backbone features through the checkpoint",
    )
    p.add_argument("--checkpoint", help="the joint model (default: the shipped SDT-RNN)")
    data_option(p, many=True, default="flickr8k,cc-web" if train else "flickr8k")
    p.add_argument(
        "--threads", type=positive_int, default=os.cpu_count() or 1, help="torch threads"
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from groundsearch.cli.concepts import hold_out_option
    from groundsearch.model.runtime.captioning import DecoderConfig
    from groundsearch.model.runtime.captioning.novel import COUNT as NOVEL_COUNT
    from groundsearch.model.runtime.captioning.novel import TAGGER_THRESHOLD
    from groundsearch.model.runtime.captioning.novel import THRESHOLD as NOVEL_THRESHOLD
    from groundsearch.model.training.captioning import DecoderTrainConfig

    p = command(
        sub, "train-decoder", cmd_train_decoder, "train a caption decoder on the joint space"
    )
    _common(p, train=True)
    p.add_argument("--out", required=True, help="decoder artifact to write (.pt)")
    hold_out_option(p)
    p.add_argument(
        "--init",
        metavar="DECODER",
        help="go on training this decoder (its architecture and words kept, the new "
        "captions' words added; as it was, it is epoch 0, kept if no epoch beats it); "
        "a --source NAME=W with W < 1 trains on that share of its photos",
    )
    p.add_argument(
        "--no-dev-scores",
        dest="dev_scores",
        action="store_false",
        help="skip the kept decoder's pooled dev scores at the end (the judge's are in "
        "the summary)",
    )
    add_config_flags(p, DecoderTrainConfig)
    add_config_flags(p, DecoderConfig, skip=("dim",))

    p = command(sub, "evaluate-captions", cmd_evaluate_captions, "score generated captions")
    _common(p)
    p.add_argument("--decoder", help="decoder artifact (default: the shipped one)")
    p.add_argument("--split", default="test", help="train/dev/test or a list file (default: test)")
    p.add_argument("--beam", type=positive_int, default=3, help="beam width (default: 3)")
    p.add_argument("--rerank", action="store_true", help="re-rank the beam by the joint score")
    p.add_argument(
        "--length-penalty", type=float, default=1.0, help="score = log p / length**this (1.0)"
    )
    p.add_argument(
        "--repeat-penalty",
        type=float,
        default=math.inf,
        help="cost of a repeated content word or n-gram (default: inf, forbidden)",
    )
    p.add_argument("--no-repeat-ngram", type=int, default=3, help="n of that n-gram (3)")
    p.add_argument(
        "--vectors",
        choices=("photos", "captions"),
        default="photos",
        help="decode the photos' vectors (default), or each photo's first caption's vector "
        "scored against its other captions (paraphrase)",
    )
    p.add_argument("--json", help="write the figures and every sentence to this file")
    p.add_argument(
        "--novel",
        action="store_true",
        help="sentences must name one of the classifier's confident words (constrained "
        "beam search over the entry-level words)",
    )
    p.add_argument(
        "--novel-threshold",
        type=probability,
        default=NOVEL_THRESHOLD,
        help=f"a word's summed class probability to be a constraint ({NOVEL_THRESHOLD})",
    )
    p.add_argument(
        "--novel-count",
        type=positive_int,
        default=NOVEL_COUNT,
        help=f"at most this many constraint words per photo ({NOVEL_COUNT})",
    )
    p.add_argument("--tagger", help="with --novel: the word tagger (default: the shipped one)")
    p.add_argument(
        "--tagger-threshold",
        type=probability,
        default=TAGGER_THRESHOLD,
        help=f"the tagger's probability for a word the decoder never learned ({TAGGER_THRESHOLD})",
    )
    p.add_argument(
        "--no-tagger",
        action="store_true",
        help="with --novel: the ImageNet classifier's words only, no word tagger",
    )
    hold_out_option(
        p,
        "the held-out-concept protocol: these concepts' mention F1 and the metrics on "
        "their photos ('default': the ten of `groundsearch train --hold-out default`); the "
        "decoder should have been trained with the same --hold-out",
    )

    from groundsearch.model.training.tagger import LEAST, WEIGHT_DECAY

    p = command(
        sub,
        "train-tagger",
        cmd_train_tagger,
        "fit the word tagger: which caption nouns a photo shows, from its CNN features",
    )
    _common(p, train=True)
    p.add_argument("--out", required=True, help="tagger to write (.npz)")
    p.add_argument(
        "--on",
        choices=("features", "vectors"),
        default="features",
        help="read the backbone's pooled features (captions: model/artifacts/word_tagger.npz) "
        "or the checkpoint's photo vectors, what a gallery stores (relevance evidence: "
        "model/artifacts/vector_tagger.npz)",
    )
    p.add_argument(
        "--least",
        type=positive_int,
        default=LEAST,
        help=f"tag the nouns used on at least this many training photos ({LEAST})",
    )
    p.add_argument(
        "--weight-decay",
        type=non_negative,
        default=WEIGHT_DECAY,
        help=f"the L2 penalty (chosen on dev: {WEIGHT_DECAY})",
    )


__all__ = ["CliError", "register"]
