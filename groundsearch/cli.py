"""The ``groundsearch`` command: one subcommand per job.

groundsearch parse "A man wearing a helmet jumps on his bike near a beach."
groundsearch parse --conllu "Students ride bikes at night."
groundsearch train-parser                # train the stanza English models from EWT
groundsearch score-parser                # CoNLL 2018 scores on EWT test from raw text
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from groundsearch.settings import get_settings


def _cmd_parse(args: argparse.Namespace) -> int:
    from model.parsing import ParseError, Parser

    texts = args.text or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        raise CliError("give a text to parse (as arguments or on standard input)")
    parser = Parser(use_cache=not args.no_cache)
    try:
        trees = parser.parse(texts)
    except ParseError as exc:
        raise CliError(str(exc)) from None
    for i, tree in enumerate(trees):
        if args.json:
            print(tree.to_json())
        elif args.conllu:
            print(tree.to_conllu())
        else:
            if i:
                print()
            print(f"# {tree.text}")
            print(tree.pretty())
    return 0


def _cmd_train_parser(args: argparse.Namespace) -> int:
    from model.parsing.compact import compact_models, write_manifest
    from model.parsing.training import STAGE_ORDER, train

    settings = get_settings()
    stages = args.stages.split(",") if args.stages else list(STAGE_ORDER)
    out = Path(args.out or settings.parser_dir)
    try:
        train(settings.ewt_dir, out, Path(args.work_dir), settings.cache_dir, stages)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        raise CliError(str(exc)) from None
    if not args.no_compact:
        compact_models(out)
    write_manifest(out, Path(args.work_dir) / "logs" / "times.jsonl")
    return 0


def _cmd_compact_parser(args: argparse.Namespace) -> int:
    from model.parsing.compact import compact_models, write_manifest

    out = Path(args.out or get_settings().parser_dir)
    for name, (before, after) in compact_models(out).items():
        print(f"{name}: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    write_manifest(out, Path(args.work_dir) / "logs" / "times.jsonl" if args.work_dir else None)
    return 0


def _cmd_score_parser(args: argparse.Namespace) -> int:
    from model.parsing.scoring import score_raw_text

    settings = get_settings()
    gold = Path(args.gold or settings.ewt_dir / "en_ewt-ud-test.conllu")
    if not gold.exists():
        raise CliError(f"gold CoNLL-U file not found: {gold}")
    scores = score_raw_text(gold, Path(args.output) if args.output else None)
    print(json.dumps(scores, indent=2))
    return 0


def _cmd_features(args: argparse.Namespace) -> int:
    from model.data import DatasetError, load_captioned_images
    from model.images.backbones import BackboneError
    from model.images.features import FeatureExtractor, ImageError

    settings = get_settings()
    root = Path(args.data or settings.data_dir / "flickr8k")
    try:
        ds = load_captioned_images(root, split=args.split)
        extractor = FeatureExtractor(
            args.backbone, ten_crop=args.ten_crop, cache_dir=settings.cache_dir
        )
        start = time.perf_counter()
        feats = extractor.embed_files(
            [ds.image_path(i) for i in range(len(ds.images))], progress=True
        )
    except (DatasetError, BackboneError, ImageError) as exc:
        raise CliError(str(exc)) from None
    print(
        json.dumps(
            {
                "images": len(feats),
                "dim": int(feats.shape[1]),
                "backbone": extractor.identity,
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    )
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from model.data import DatasetError
    from model.experiment import run_training
    from model.joint import JointConfig
    from model.training import TrainConfig

    settings = get_settings()
    if args.encoder == "kcca":
        return _train_kcca(args, Path(args.data or settings.data_dir / "flickr8k"))
    try:
        joint = JointConfig(
            encoder=args.encoder,
            hidden=args.hidden,
            rnn_hidden=args.rnn_hidden,
            relation_min_count=args.relation_min_count,
            sqrt_features=args.sqrt_features,
            freeze_words=not args.tune_words,
            seed=args.seed,
        )
        cfg = TrainConfig(
            epochs=args.epochs,
            batch_size=args.batch_size,
            margin=args.margin,
            hardest=args.hardest,
            warmup=args.warmup,
            normalize=args.normalize,
            optimizer=args.optimizer,
            lr=args.lr,
            weight_decay=args.weight_decay,
            cycles=args.cycles,
            ensemble=args.ensemble,
            seed=args.seed,
        )
        summary = run_training(
            Path(args.data or settings.data_dir / "flickr8k"),
            Path(args.out),
            joint,
            cfg,
            backbone=args.backbone,
            ten_crop=args.ten_crop,
            half=args.half,
        )
    except (DatasetError, ValueError) as exc:
        raise CliError(str(exc)) from None
    keys = ("encoder", "dev", "best_epoch", "train_seconds")
    print(json.dumps(_rounded({k: summary[k] for k in keys}), indent=2))
    return 0


def _train_kcca(args: argparse.Namespace, data: Path) -> int:
    """``train --encoder kcca``: the kernel CCA baseline, its grid selected on dev rsum."""
    from model.baselines.kcca import KCCAConfig
    from model.data import DatasetError
    from model.experiment import run_kcca_training

    try:
        summary = run_kcca_training(
            data,
            Path(args.out),
            KCCAConfig(n_landmarks=args.landmarks, seed=args.seed),
            backbone=args.backbone,
            ten_crop=args.ten_crop,
        )
    except (DatasetError, ValueError) as exc:
        raise CliError(str(exc)) from None
    keys = ("encoder", "selected", "dev", "train_seconds")
    print(json.dumps(_rounded({k: summary[k] for k in keys}), indent=2))
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from model.data import DatasetError
    from model.experiment import evaluate_checkpoint
    from model.joint import CheckpointError
    from model.parsing import ParseError
    from model.text import NoKnownWordError

    settings = get_settings()
    try:
        result = evaluate_checkpoint(
            Path(args.checkpoint or settings.default_checkpoint),
            Path(args.data or settings.data_dir / "flickr8k"),
            split=args.split or None,
            progress=True,
            sentence_benchmarks=not args.no_sentence_benchmarks,
        )
    except (DatasetError, CheckpointError, ParseError, NoKnownWordError) as exc:
        raise CliError(str(exc)) from None
    print(json.dumps(_rounded(result), indent=2))
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from model.plots import SummaryError, load_summary, plot_history

    src = Path(args.summary)
    out = Path(args.out) if args.out else src.with_suffix(".png")
    if out.resolve() == src.resolve():
        raise CliError(f"--out {out} would overwrite the summary itself")
    try:
        summary = load_summary(src)
        best = summary.get("best_epoch")
        title = f"{summary.get('encoder', 'model')}: {src.stem}"
        ensemble = summary.get("ensemble_dev_rsum")
        plot_history(
            summary["history"],
            out,
            title,
            best if isinstance(best, int) else None,
            ensemble if isinstance(ensemble, int | float) else None,
        )
    except SummaryError as exc:
        raise CliError(str(exc)) from None
    print(out)
    return 0


def _cmd_relations(args: argparse.Namespace) -> int:
    from model.analysis import format_ranking, identity_norm, relation_norms
    from model.joint import CheckpointError, JointModel

    # No parser check: nothing is parsed here, only the stored matrices are read.
    try:
        model = JointModel.load(Path(args.checkpoint or get_settings().default_checkpoint))
    except CheckpointError as exc:
        raise CliError(str(exc)) from None
    try:
        ranking = relation_norms(model)
    except ValueError as exc:
        raise CliError(f"{args.checkpoint}: {exc}") from None
    shown = ranking[: args.top] if args.top else ranking
    if not args.markdown:
        print(
            f"# {len(ranking)} relation matrices, largest Frobenius norm first "
            f"(identity: {identity_norm(model):.3f})"
        )
    print(format_ranking(shown, markdown=args.markdown))
    return 0


def _cmd_build_index(args: argparse.Namespace) -> int:
    from index.gallery import build_gallery
    from index.store import StoreError
    from model.data import DatasetError
    from model.joint import CheckpointError
    from model.parsing import ParseError

    settings = get_settings()
    out = Path(args.out or settings.gallery_dir)
    checkpoint = Path(args.checkpoint or settings.default_checkpoint)
    if args.sample and args.data:
        raise CliError("--sample builds the shipped sample gallery; it takes no --data")
    start = time.perf_counter()
    try:
        if args.sample:
            from index.sample_gallery import build_sample_gallery

            gallery = build_sample_gallery(
                checkpoint, out, settings.cache_dir, progress=True, kind=args.kind
            )
        else:
            gallery = build_gallery(
                checkpoint,
                Path(args.data or settings.data_dir / "flickr8k"),
                args.split or None,
                out,
                kind=args.kind,
                cache_dir=settings.cache_dir,
                progress=True,
            )
    except (DatasetError, CheckpointError, ParseError, StoreError, ValueError) as exc:
        raise CliError(str(exc)) from None
    summary = {
        "gallery": str(out),
        "images": len(gallery.images),
        "captions": len(gallery.captions),
        "kind": args.kind,
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(summary))
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from index.store import StoreError
    from model.data import DatasetError
    from model.joint import CheckpointError
    from service.app import create_app
    from service.default_gallery import ensure_gallery
    from service.settings import ServiceSettings

    overrides = {"checkpoint": args.checkpoint, "index_dir": args.index}
    try:
        settings = ServiceSettings(**{k: Path(v) for k, v in overrides.items() if v})
        served = ensure_gallery(settings, sample=args.sample)
    except (DatasetError, CheckpointError, StoreError, ValueError) as exc:
        raise CliError(str(exc)) from None
    print(f"serving {served} on http://{args.host}:{args.port}", file=sys.stderr)
    uvicorn.run(create_app(settings), host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _rounded(value: object, digits: int = 2) -> object:
    """Floats rounded for printing, inside dicts and lists too."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v, digits) for v in value]
    return value


class CliError(Exception):
    """A problem with the command's input, reported without a traceback."""


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="groundsearch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("parse", help="print the dependency tree of texts")
    p.add_argument("text", nargs="*", help="texts to parse (default: lines of stdin)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--conllu", action="store_true", help="print CoNLL-U")
    fmt.add_argument("--json", action="store_true", help="print one JSON tree per line")
    p.add_argument("--no-cache", action="store_true", help="do not use the parse cache")
    p.set_defaults(func=_cmd_parse)

    p = sub.add_parser("train-parser", help="train the stanza English models from UD EWT")
    p.add_argument("--stages", help="comma-separated subset of tokenize,mwt,lemma,pos,depparse")
    p.add_argument("--out", help="where the models go (default: the settings' parser dir)")
    p.add_argument("--work-dir", default="work/parser", help="prepared data and logs")
    p.add_argument("--no-compact", action="store_true", help="keep optimizer state")
    p.set_defaults(func=_cmd_train_parser)

    p = sub.add_parser("compact-parser", help="strip training state from the stanza models")
    p.add_argument("--out", help="model folder (default: the settings' parser dir)")
    p.add_argument("--work-dir", help="training work dir whose logs/times.jsonl to record")
    p.set_defaults(func=_cmd_compact_parser)

    p = sub.add_parser("score-parser", help="CoNLL 2018 scores from raw text (EWT test)")
    p.add_argument("--gold", help="gold CoNLL-U (default: EWT test)")
    p.add_argument("--output", help="also write the system CoNLL-U here")
    p.set_defaults(func=_cmd_score_parser)
    p = sub.add_parser("serve", help="run the web service and its page (default :8000)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--port", type=_positive_int, default=8000, help="port to listen on")
    p.add_argument("--index", help="gallery folder (default: GROUNDSEARCH_INDEX_DIR or cache)")
    p.add_argument("--checkpoint", help="joint model (default: the shipped SDT-RNN)")
    p.add_argument(
        "--sample", action="store_true", help="build the sample gallery even if Flickr8k is there"
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("build-index", help="embed a Flickr8k-layout split into a gallery")
    p.add_argument("checkpoint", nargs="?", help="default: the shipped SDT-RNN")
    p.add_argument("--data", help="Flickr8k-layout folder (default: DATA_DIR/flickr8k)")
    p.add_argument("--split", default="test", help="train/dev/test, a list file, or ''")
    p.add_argument("--out", help="gallery folder (default: CACHE_DIR/gallery)")
    p.add_argument("--kind", default="flat", choices=["flat", "hnsw"], help="exact or HNSW")
    p.add_argument(
        "--sample",
        action="store_true",
        help="embed the shipped sample photos (scikit-image's, our captions), not Flickr8k",
    )
    p.set_defaults(func=_cmd_build_index)

    p = sub.add_parser("features", help="extract (and cache) image features of a dataset")
    p.add_argument("--data", help="Flickr8k-layout folder (default: DATA_DIR/flickr8k)")
    p.add_argument("--split", help="train, dev, test or a file of image names")
    p.add_argument("--backbone", default="efficientnet-lite0")
    p.add_argument("--ten-crop", action="store_true", help="average 10 crops")
    p.set_defaults(func=_cmd_features)

    p = sub.add_parser("train", help="train a joint model (Eq. 5), select on dev rsum")
    p.add_argument("--data", help="Flickr8k-layout folder (default: DATA_DIR/flickr8k)")
    p.add_argument("--out", required=True, help="checkpoint to write (.pt)")
    p.add_argument("--encoder", default="sdt-rnn", help="a joint-model encoder, or kcca")
    p.add_argument("--landmarks", type=int, default=2000, help="kcca: Nyström landmarks")
    p.add_argument("--hidden", type=int, default=50)
    p.add_argument("--rnn-hidden", type=int, default=512, help="LSTM/GRU/Tree-LSTM state size")
    p.add_argument(
        "--relation-min-count",
        type=int,
        default=5,
        help="sdt-rnn: rarer relations share their base relation's matrix",
    )
    p.add_argument(
        "--sqrt-features", action="store_true", help="square-root the CNN features first"
    )
    p.add_argument("--tune-words", action="store_true", help="fine-tune word vectors")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--margin", type=float, default=3.0)
    p.add_argument("--hardest", action="store_true", help="hardest negative only (VSE++)")
    p.add_argument(
        "--warmup", type=int, default=0, help="with --hardest: epochs of all negatives first"
    )
    p.add_argument("--normalize", action="store_true", help="cosine instead of inner product")
    p.add_argument("--optimizer", default="adagrad", choices=["adagrad", "adam-cyclic"])
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--cycles", type=int, default=4, help="adam-cyclic: LR cycles")
    p.add_argument(
        "--ensemble", action="store_true", help="adam-cyclic: keep the cycle-end snapshots"
    )
    p.add_argument("--half", action="store_true", help="store the weights as float16")
    p.add_argument("--backbone", default="efficientnet-lite0")
    p.add_argument("--ten-crop", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser(
        "evaluate",
        help="retrieval, sentence similarity, expert, STS-B and SICK-R scores of a checkpoint",
    )
    p.add_argument(
        "checkpoint",
        nargs="?",
        help="a joint-model or kcca checkpoint (.pt; default: the shipped SDT-RNN)",
    )
    p.add_argument("--data", help="Flickr8k-layout folder (default: DATA_DIR/flickr8k)")
    p.add_argument("--split", default="test", help="train/dev/test, a list file, or ''")
    p.add_argument("--no-sentence-benchmarks", action="store_true", help="skip STS-B and SICK-R")
    p.set_defaults(func=_cmd_evaluate)

    p = sub.add_parser("plot", help="PNG of the loss and dev rsum curves of a training run")
    p.add_argument("summary", help="training summary JSON (the .json beside a checkpoint)")
    p.add_argument("--out", help="PNG to write (default: the summary's name with .png)")
    p.set_defaults(func=_cmd_plot)

    p = sub.add_parser("relations", help="SDT-RNN relation matrices by Frobenius norm")
    p.add_argument(
        "checkpoint", nargs="?", help="an sdt-rnn checkpoint (.pt; default: the shipped one)"
    )
    p.add_argument("--top", type=_positive_int, help="show only the N largest")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.set_defaults(func=_cmd_relations)
    return ap


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CliError as exc:
        print(f"groundsearch {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"groundsearch {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
