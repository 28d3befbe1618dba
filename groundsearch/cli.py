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
    return ap


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
