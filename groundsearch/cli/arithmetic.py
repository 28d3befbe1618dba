"""``groundsearch evaluate-arithmetic``: embedding arithmetic, measured (docs/RESULTS.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from groundsearch.cli.common import (
    CliError,
    checkpoint_argument,
    checkpoint_path,
    command,
    data_option,
    data_root,
    json_text,
    make_parser,
    positive_int,
    user_errors,
)
from groundsearch.common.files import write_text
from groundsearch.common.settings import get_settings

COMMANDS = ("evaluate-arithmetic",)


def cmd_evaluate_arithmetic(args: argparse.Namespace) -> int:
    from groundsearch.model.data import DatasetError
    from groundsearch.model.runtime.checkpoints import CheckpointError
    from groundsearch.model.runtime.sentences import UnusableText
    from groundsearch.model.training.evaluation.arithmetic import parse_pairs
    from groundsearch.model.training.experiment import evaluate_arithmetic_checkpoint

    try:
        pairs = parse_pairs(args.pairs)
    except ValueError as exc:
        raise CliError(f"--pairs: {exc}") from None
    out = Path(args.out) if args.out else None
    if out is not None and (out.is_dir() or not out.parent.is_dir()):
        raise CliError(f"--out {out}: not a file in an existing folder")
    with user_errors(DatasetError, CheckpointError, UnusableText, ValueError):
        result = evaluate_arithmetic_checkpoint(
            checkpoint_path(args),
            data_root(args),
            make_parser(),
            get_settings().cache_dir,
            pairs,
            split=args.split or None,
            k=args.k,
            rerank=args.rerank,
            examples=args.examples,
            min_starts=args.min_starts,
            min_b_photos=args.min_b_photos,
            progress=True,
        )
    text = json_text(result, ascii_only=False) + "\n"
    if out is None:
        print(text, end="")
    else:
        write_text(out, text)
        mean = result["mean"]
        line = ", ".join(
            f"{q} {mean[q]['share_b']:.1f}" for q in ("arithmetic", "text", "photo") if q in mean
        )
        print(f"wrote {out}: share of B in the top {args.k}, mean of {mean['pairs']} pairs: {line}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from groundsearch.model.training.evaluation.arithmetic import (
        DEFAULT_PAIRS,
        MIN_B_PHOTOS,
        MIN_STARTS,
    )

    p = command(
        sub,
        "evaluate-arithmetic",
        cmd_evaluate_arithmetic,
        'score photo − "A" + "B" on a split: share of photos of B in the top k',
    )
    checkpoint_argument(p, "a joint-model or kcca checkpoint (.pt)")
    data_option(p)
    p.add_argument("--split", default="test", help="train/dev/test, a list file, or ''")
    p.add_argument(
        "--pairs",
        default=DEFAULT_PAIRS,
        help="A>B pairs, comma-separated; word/lemma types word and matches either "
        "(default: the 20 pairs of docs/RESULTS.md)",
    )
    p.add_argument("--k", type=positive_int, default=5, help="top k scored (default: 5)")
    p.add_argument("--rerank", action="store_true", help="as /arithmetic?rerank=true")
    p.add_argument(
        "--examples",
        type=int,
        default=3,
        choices=range(0, 101),
        metavar="N",
        help="list the results of the first N start photos of each pair (0–100, default: 3)",
    )
    p.add_argument(
        "--min-starts",
        type=positive_int,
        default=MIN_STARTS,
        help=f"a pair counts in the mean with this many start photos (default: {MIN_STARTS})",
    )
    p.add_argument(
        "--min-b-photos",
        type=positive_int,
        default=MIN_B_PHOTOS,
        help=f"… and this many photos of B (default: {MIN_B_PHOTOS})",
    )
    p.add_argument("--out", help="JSON file to write (default: print it)")
