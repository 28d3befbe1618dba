"""The ``groundsearch`` command: one subcommand per job, one module per group.

groundsearch parse "A man wearing a helmet jumps on his bike near a beach."
groundsearch train --encoder sdt-rnn --out runs/sdt.pt   # Eq. 5, selected on dev rsum
groundsearch evaluate                                    # the shipped SDT-RNN on test
groundsearch evaluate-arithmetic --out a.json           # photo − "dog" + "man", measured
groundsearch fit-relevance                               # relevance of hits, on dev
groundsearch index ~/Photos                              # your photos → a gallery
groundsearch serve                                       # the web service on :8000
groundsearch search "a dog on the beach"                 # the gallery's photos, no server
groundsearch describe photo.jpg                          # sentences for a photo
"""

from __future__ import annotations

import argparse
import os
import sys
from types import ModuleType

from groundsearch.cli import (
    arithmetic,
    captioning,
    concepts,
    hubness,
    indexing,
    parsing,
    relevance,
    searching,
    serving,
    teaching,
    training,
)
from groundsearch.cli.common import CliError

__all__ = ["CliError", "build_parser", "main"]

GROUPS: tuple[ModuleType, ...] = (
    *(parsing, serving, indexing, searching, training, concepts),
    *(arithmetic, captioning, hubness, relevance, teaching),
)


def build_parser(groups: tuple[ModuleType, ...] = GROUPS) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="groundsearch",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for group in groups:
        group.register(sub)
    return ap


def parser_for(argv: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The parser of the group alone whose ``COMMANDS`` ``argv`` runs (some groups' flags
    import the model: a command starts without the others'), with ``argv`` as its
    ``normalise`` reads it; the parser of every command for anything else (``--help``)."""
    for group in GROUPS:
        if argv and argv[0] in group.COMMANDS:
            return build_parser((group,)), getattr(group, "normalise", list)(argv)
    return build_parser(), argv


def main(argv: list[str] | None = None) -> int:
    """Run a command (``argv``: the process's own arguments when None)."""
    own = argv is None
    parser, argv = parser_for(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    try:
        status = int(args.func(args) or 0)
    except (CliError, FileNotFoundError) as exc:
        print(f"groundsearch {args.command}: error: {exc}", file=sys.stderr)
        status = 2
    if own and getattr(args, "quick_exit", False):
        # the interpreter's teardown of torch, FAISS and GloVe takes longer than a search
        # (docs/BENCHMARKS.md, "Terminal search")
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    return status
