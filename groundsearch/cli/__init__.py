"""The ``groundsearch`` command: one subcommand per job, one module per group.

groundsearch parse "A man wearing a helmet jumps on his bike near a beach."
groundsearch train --encoder sdt-rnn --out runs/sdt.pt   # Eq. 5, selected on dev rsum
groundsearch evaluate                                    # the shipped SDT-RNN on test
groundsearch evaluate-arithmetic --out a.json           # photo − "dog" + "man", measured
groundsearch fit-relevance                               # relevance of hits, on dev
groundsearch index ~/Photos                              # your photos → a gallery
groundsearch serve                                       # the web service on :8000
"""

from __future__ import annotations

import argparse
import sys

from groundsearch.cli import (
    arithmetic,
    captioning,
    concepts,
    indexing,
    parsing,
    relevance,
    serving,
    training,
)
from groundsearch.cli.common import CliError

__all__ = ["CliError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="groundsearch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for group in (
        parsing,
        serving,
        indexing,
        training,
        concepts,
        arithmetic,
        captioning,
        relevance,
    ):
        group.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (CliError, FileNotFoundError) as exc:
        print(f"groundsearch {args.command}: error: {exc}", file=sys.stderr)
        return 2
