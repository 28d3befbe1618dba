"""``groundsearch search`` and ``groundsearch describe``: from a terminal, on a gallery on
disk (``groundsearch.cli.local``) or on a running server (``--url``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from groundsearch.cli.common import CliError, command, positive_int, user_errors

if TYPE_CHECKING:
    from groundsearch.client import GroundsearchError
    from groundsearch.index.filters.conditions import PhotoFilter
    from groundsearch.service.core.settings import ServiceSettings

#: The commands of this group (``groundsearch.cli.main`` registers only them when one of
#: them is run: the other groups' flags import the model and training code).
COMMANDS = ("search", "describe")
#: Flags whose value may start with "-" ("--order -date", "--near -33.86,151.21"), which
#: argparse would read as another flag: these and every filter's.
DASHED_VALUES = ("--order", "--min-relevance")

SEARCH_EPILOG = """\
examples:
  groundsearch search "a dog runs on the beach"                 # the served gallery on disk
  groundsearch search "a bridge" --index ~/galleries/photos --near 48.8584,2.2945 --within-km 5
  groundsearch search "a cake" --after 2024-06-01 --before 2024-09-01 --order -date -k 20
  groundsearch search "a dog" --json | jq -r '.results[].path'
  groundsearch search "a dog" --url http://127.0.0.1:8000       # ask a running server

Prints the paths of the photos whose relevance reaches --min-relevance (the relevance
model's default unless given; 0 prints every hit), best first; --json prints the
API's /search answer (results, weak, no_match, next, total, ...), each hit with its
file's "path". Without --url the gallery is read from disk, as a read-only replica
reads it (safe while `groundsearch index` or `groundsearch serve` writes it).
"""

DESCRIBE_EPILOG = """\
examples:
  groundsearch describe photo.jpg                 # written sentence, concepts, captions
  groundsearch describe photo.jpg --json
  groundsearch describe photo.jpg --url http://127.0.0.1:8000

Prints the sentence the caption decoder writes for the photo, what the backbone's
ImageNet classifier saw in it, and the captions (the gallery's and the caption bank's)
nearest to it whose relevance reaches --min-relevance; --json prints the API's
/describe answer.
"""


def normalise(argv: list[str]) -> list[str]:
    """``argv`` with a dashed value joined to its flag (``--order=-date``)."""
    from groundsearch.index.filters.conditions import FILTER_NAMES

    dashed = DASHED_VALUES + tuple(flag(name) for name in FILTER_NAMES)
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in dashed and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def flag(parameter: str) -> str:
    """The command-line flag of an API parameter: ``within_km`` → ``--within-km``."""
    return "--" + parameter.replace("_", "-")


def service_settings(args: argparse.Namespace) -> ServiceSettings:
    """The server's settings (``GROUNDSEARCH_*``: the gallery, checkpoint, relevance
    model, decoder, caption bank), with ``--index`` and ``--checkpoint`` over them."""
    from pydantic import ValidationError

    from groundsearch.service.core.settings import ServiceSettings

    given = {"index_dir": args.index, "checkpoint": args.checkpoint}
    given["caption_bank"] = getattr(args, "bank", None)
    try:
        return ServiceSettings(**{k: v for k, v in given.items() if v})
    except ValidationError as exc:
        raise CliError(f"bad setting: {exc}") from None


def source_flags(p: argparse.ArgumentParser) -> None:
    """``--index`` or ``--url``, ``--checkpoint`` and ``--json``."""
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--index", help="gallery folder on disk (default: GROUNDSEARCH_INDEX_DIR or the cache's)"
    )
    where.add_argument("--url", help="ask the groundsearch server at this URL instead")
    p.add_argument("--checkpoint", help="joint model (default: the shipped SDT-RNN; not --url)")
    p.add_argument("--json", action="store_true", help="print the API's JSON answer")
    p.add_argument("--timings", action="store_true", help="print the time of each phase to stderr")
    p.add_argument(
        "--min-relevance",
        type=relevance_value,
        help="hits below this relevance (0..1) are left out (default: the relevance "
        "model's; 0 keeps every hit)",
    )


def relevance_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, got {text}")
    return value


def client_error(exc: GroundsearchError) -> CliError:
    """A server's problem as the command's error, naming the flags of a 422's parameters."""
    if exc.status is None:
        return CliError(exc.detail)
    named = [flag(p) for p in exc.parameters]
    detail = exc.detail
    if exc.errors:
        detail = "; ".join(f"{flag(str(e.loc[-1]))}: {e.msg}" for e in exc.errors if e.loc)
    elif named:
        detail = f"{', '.join(named)}: {detail}"
    return CliError(f"the server answered {exc.status} ({exc.title}): {detail}")


def print_json(answer: Any) -> None:
    print(json.dumps(answer, indent=2, ensure_ascii=False))


def read_filter(args: argparse.Namespace) -> PhotoFilter:
    """The filters given, checked as the server checks them (CliError naming the flag)."""
    from groundsearch.index.filters.conditions import FILTER_NAMES, FilterError, PhotoFilter

    values = {name: getattr(args, name) for name in FILTER_NAMES}
    if values["folder"]:  # a folder here: relative to the current one, as the indexer spells it
        values["folder"] = args.folder = os.path.abspath(os.path.expanduser(values["folder"]))
    try:
        return PhotoFilter.from_query(**values)
    except FilterError as exc:
        raise CliError(f"{flag(exc.parameter)}: {exc}") from None


def cmd_search(args: argparse.Namespace) -> int:
    where = read_filter(args)  # before anything is loaded or asked
    answer = remote_search(args) if args.url else local_search(args, where)
    if args.json:
        print_json(answer)
        return 0
    for hit in answer["results"]:
        print(hit["path"])
    sys.stdout.flush()  # the results first, whatever follows
    report_left_out(answer, args, bool(where))
    return 0


def report_left_out(answer: dict[str, Any], args: argparse.Namespace, filtered: bool) -> None:
    """Say on stderr why fewer paths than asked were printed: weak hits left out, no
    photo passing the filters, an empty gallery."""
    weak, threshold = len(answer["weak"]), answer.get("min_relevance")
    if answer["no_match"] and weak:
        print(
            f'no good match for "{args.text}": {weak} closest photos are below '
            f"min_relevance {threshold:g} (--min-relevance 0 prints them)",
            file=sys.stderr,
        )
    elif answer["no_match"] and filtered:
        print("no photo passes the filters", file=sys.stderr)
    elif answer["no_match"]:
        print("the gallery holds no photo yet", file=sys.stderr)
    elif weak:
        print(
            f"{weak} weaker hits below min_relevance {threshold:g} left out "
            "(--min-relevance 0 prints them)",
            file=sys.stderr,
        )


def local_search(args: argparse.Namespace, where: PhotoFilter) -> dict[str, Any]:
    from groundsearch.cli.local import Clock, LocalGallery, require_gallery
    from groundsearch.index.ranking.photo_pages import PageAsk
    from groundsearch.model.runtime.sentences import UnusableText, clean

    clock = Clock()
    settings = service_settings(args)
    with user_errors(UnusableText):
        clean(args.text, "text", settings.max_text_chars)  # refused before the model loads
    require_gallery(settings)
    local = LocalGallery.open(settings, clock)
    try:
        ask = PageAsk(args.k, where, args.order, args.cursor)
        with user_errors(UnusableText):
            answer = local.search(args.text, ask, args.min_relevance)
    finally:
        local.close()
    if args.timings:
        print(clock.report(answer), file=sys.stderr)
    return answer


def remote_search(args: argparse.Namespace) -> dict[str, Any]:
    from groundsearch.client import Client, GroundsearchError
    from groundsearch.index.filters.conditions import FILTER_NAMES

    if args.checkpoint:
        raise CliError("--checkpoint names a model on disk: the server at --url serves its own")
    try:
        with Client(args.url) as client:
            page = client.search(
                args.text,
                k=args.k,
                min_relevance=args.min_relevance,
                order=args.order,
                cursor=args.cursor,
                **{name: getattr(args, name) for name in FILTER_NAMES},
            )
            answer = dataclasses.asdict(page)
            for hit, typed in zip(
                answer["results"] + answer["weak"], page.results + page.weak, strict=True
            ):
                hit["path"] = typed.path or f"{client.base_url}{typed.url}"
            return answer
    except GroundsearchError as exc:
        raise client_error(exc) from None


def cmd_describe(args: argparse.Namespace) -> int:
    photo = Path(args.photo)
    if not photo.is_file():
        raise CliError(f"no photo at {photo}")
    answer = remote_describe(args, photo) if args.url else local_describe(args, photo)
    if args.json:
        print_json(answer)
        return 0
    for sentence in answer["generated"][:1]:
        print(sentence["text"])
    seen = [
        f"{c['word'] or c['imagenet_class']} {c['word_probability'] or c['probability']:.2f}"
        for c in answer["concepts"]
    ]
    if seen:
        print("saw: " + ", ".join(seen))
    for hit in answer["results"]:
        where = hit.get("path") or ("caption bank" if hit["source"] == "bank" else "")
        print(
            f"{hit['relevance'] if hit['relevance'] is not None else hit['score']:.2f}  "
            f"{hit['text']}" + (f"  ({where})" if where else "")
        )
    if weak := len(answer["weak"]):
        print(
            f"{weak} captions below min_relevance {answer['min_relevance']:g} left out "
            "(--min-relevance 0 prints them)",
            file=sys.stderr,
        )
    return 0


def local_describe(args: argparse.Namespace, photo: Path) -> dict[str, Any]:
    from groundsearch.cli.local import Clock, LocalGallery, require_gallery

    clock = Clock()
    settings = service_settings(args)
    if args.sentences == "generated":  # no caption bank to load
        settings = settings.model_copy(update={"caption_bank": "none"})
    require_gallery(settings)
    local = LocalGallery.open(settings, clock)
    try:
        answer = local.describe(photo, args.k, args.sentences, args.beam, args.min_relevance)
    finally:
        local.close()
    if args.timings:
        print(clock.report(answer), file=sys.stderr)
    return answer


def remote_describe(args: argparse.Namespace, photo: Path) -> dict[str, Any]:
    from groundsearch.client import Client, GroundsearchError

    if args.checkpoint or args.bank:
        raise CliError("--checkpoint and --bank are the server's own with --url")
    try:
        with Client(args.url) as client:
            answer = dataclasses.asdict(
                client.describe(
                    photo,
                    k=args.k,
                    sentences=args.sentences,
                    beam=args.beam,
                    min_relevance=args.min_relevance,
                )
            )
    except GroundsearchError as exc:
        raise client_error(exc) from None
    except OSError as exc:
        raise CliError(f"cannot read {photo}: {exc}") from None
    for hit in answer["results"] + answer["weak"]:
        url = hit["image_url"]
        hit["path"] = f"{args.url.rstrip('/')}{url}" if url else None
    return answer


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from groundsearch.index.filters.conditions import FILTER_PARAMS
    from groundsearch.index.ranking.pages import ORDERS

    p = command(sub, "search", cmd_search, "find photos by a sentence, from a terminal")
    p.set_defaults(quick_exit=True)
    p.epilog, p.formatter_class = SEARCH_EPILOG, argparse.RawDescriptionHelpFormatter
    p.add_argument("text", help="a sentence or phrase in English")
    source_flags(p)
    p.add_argument("-k", type=positive_int, default=10, help="how many photos (default: 10)")
    p.add_argument(
        "--order",
        choices=ORDERS,
        default=ORDERS[0],
        help="best match first (default), or the good matches by date: oldest or newest first",
    )
    p.add_argument("--cursor", help="the 'next' of a previous --json answer: the page after it")
    f = p.add_argument_group("filters (as /search's: docs/API.md)")
    for param in FILTER_PARAMS:
        more = " ('.': the current one)" if param.name == "folder" else ""
        f.add_argument(
            flag(param.name),
            choices=param.choices or None,
            help=f"{param.help}{more} E.g. {param.example}",
        )

    d = command(sub, "describe", cmd_describe, "describe a photo with sentences, from a terminal")
    d.set_defaults(quick_exit=True)
    d.epilog, d.formatter_class = DESCRIBE_EPILOG, argparse.RawDescriptionHelpFormatter
    d.add_argument("photo", help="a photo file")
    source_flags(d)
    d.add_argument("-k", type=positive_int, default=5, help="how many captions (default: 5)")
    d.add_argument(
        "--sentences",
        choices=("both", "generated", "retrieved"),
        default="both",
        help="written sentences, found captions, or both (default)",
    )
    d.add_argument("--beam", type=positive_int, help="beam width of written sentences")
    d.add_argument(
        "--bank",
        help="captions to draw from besides the gallery's: training (default), none, or a "
        "TSV/JSONL captions file (as GROUNDSEARCH_CAPTION_BANK)",
    )
