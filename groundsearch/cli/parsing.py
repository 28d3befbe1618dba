"""``groundsearch parse``, ``train-parser``, ``compact-parser`` and ``score-parser``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from groundsearch.cli.common import CliError, command, make_parser, user_errors
from groundsearch.common.settings import get_settings

COMMANDS = ("parse", "train-parser", "compact-parser", "score-parser")


def cmd_parse(args: argparse.Namespace) -> int:
    from groundsearch.model.runtime.parsing import ParseError

    texts = args.text or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        raise CliError("give a text to parse (as arguments or on standard input)")
    with user_errors(ParseError):
        trees = make_parser(use_cache=not args.no_cache).parse(texts)
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


def cmd_train_parser(args: argparse.Namespace) -> int:
    from groundsearch.model.training.parser.compact import compact_models, write_manifest
    from groundsearch.model.training.parser.stages import STAGE_ORDER, train

    s = get_settings()
    stages = args.stages.split(",") if args.stages else list(STAGE_ORDER)
    out = Path(args.out or s.parser_dir)
    with user_errors(FileNotFoundError, ValueError, RuntimeError):
        train(s.ewt_dir, out, Path(args.work_dir), s.cache_dir, stages)
    if not args.no_compact:
        compact_models(out)
    write_manifest(out, Path(args.work_dir) / "logs" / "times.jsonl")
    return 0


def cmd_compact_parser(args: argparse.Namespace) -> int:
    from groundsearch.model.training.parser.compact import compact_models, write_manifest

    out = Path(args.out or get_settings().parser_dir)
    for name, (before, after) in compact_models(out).items():
        print(f"{name}: {before / 1e6:.1f} MB -> {after / 1e6:.1f} MB")
    write_manifest(out, Path(args.work_dir) / "logs" / "times.jsonl" if args.work_dir else None)
    return 0


def cmd_score_parser(args: argparse.Namespace) -> int:
    from groundsearch.model.training.parser.scoring import score_raw_text

    s = get_settings()
    gold = Path(args.gold or s.ewt_dir / "en_ewt-ud-test.conllu")
    if not gold.exists():
        raise CliError(f"gold CoNLL-U file not found: {gold}")
    output = Path(args.output) if args.output else None
    print(json.dumps(score_raw_text(gold, s.parser_dir, s.cache_dir, output), indent=2))
    return 0


def _folders(p: argparse.ArgumentParser, work_dir: str | None, work_help: str) -> None:
    """``--out`` (the stanza models' folder) and ``--work-dir``."""
    p.add_argument("--out", help="model folder (default: the settings' parser dir)")
    p.add_argument("--work-dir", default=work_dir, help=work_help)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "parse", cmd_parse, "print the dependency tree of texts")
    p.add_argument("text", nargs="*", help="texts to parse (default: lines of stdin)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--conllu", action="store_true", help="print CoNLL-U")
    fmt.add_argument("--json", action="store_true", help="print one JSON tree per line")
    p.add_argument("--no-cache", action="store_true", help="do not use the parse cache")

    p = command(sub, "train-parser", cmd_train_parser, "train the stanza models from UD EWT")
    p.add_argument("--stages", help="comma-separated subset of tokenize,mwt,lemma,pos,depparse")
    _folders(p, "work/parser", "prepared data and logs")
    p.add_argument("--no-compact", action="store_true", help="keep optimizer state")

    p = command(sub, "compact-parser", cmd_compact_parser, "strip training state from models")
    _folders(p, None, "training work dir whose logs/times.jsonl to record")

    p = command(sub, "score-parser", cmd_score_parser, "CoNLL 2018 scores on EWT test, raw text")
    p.add_argument("--gold", help="gold CoNLL-U (default: EWT test)")
    p.add_argument("--output", help="also write the system CoNLL-U here")
