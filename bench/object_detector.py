"""The COCO object detector as relevance evidence (bench/detector/; measured, not
shipped): fit and measure the relevance model with its evidence (``groundsearch
fetch-objects`` installs it; the short-query fusion reads it as served).

    python bench/object_detector.py fit-relevance --out /tmp/o.json
    python bench/object_detector.py evaluate-relevance --relevance /tmp/o.json
    python bench/everyday_words.py --objects --relevance /tmp/o.json
    python bench/concept_evidence.py --objects

``fit-relevance`` and ``evaluate-relevance`` are ``groundsearch``'s commands, with their
options, run with each photo's classes holding the COCO kinds the detector finds and the
noun → kinds table ``detector/noun_objects.tsv`` merged into the noun → classes table
(``detector.relevance``); ``fit-relevance`` needs ``--out`` (the shipped relevance.json
is the detector-free one). docs/RESULTS.md, "An object detector's evidence".
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from detector.relevance import detector_splits

from groundsearch.cli import relevance
from groundsearch.cli.common import CliError, user_errors
from groundsearch.model.runtime.objects.detector import ObjectsError


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python bench/object_detector.py", description=__doc__.split("\n\n")[0]
    )
    sub = ap.add_subparsers(dest="command", required=True)
    relevance.register(sub)  # fit-relevance and evaluate-relevance, with their options
    return ap


def run(args: argparse.Namespace) -> int:
    """The command, its splits embedded with the detector; CliError for a user error."""
    if args.command == "fit-relevance" and not args.out:
        raise CliError("--out is required: the artifacts' relevance.json is the shipped one")
    with user_errors(ObjectsError), detector_splits():
        return int(args.func(args) or 0)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except (CliError, FileNotFoundError) as exc:
        print(f"object_detector.py {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
