"""What every command group shares: errors, flags made from config dataclasses (each
default written once, in its field), paths read from the settings."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from groundsearch.common.settings import get_settings

if TYPE_CHECKING:
    from groundsearch.model.data.sources import Source
    from groundsearch.model.runtime.embedder import JointEmbedder
    from groundsearch.model.runtime.images.features import FeatureExtractor
    from groundsearch.model.runtime.kcca import KCCAModel
    from groundsearch.model.runtime.parsing import Parser
    from groundsearch.model.training.corpus import TreesFn

T = TypeVar("T")


class CliError(Exception):
    """A problem with the command's input, reported without a traceback."""


@contextmanager
def user_errors(*kinds: type[BaseException]) -> Iterator[None]:
    """Report the listed exceptions as a CliError (their message, no traceback)."""
    try:
        yield
    except kinds as exc:
        raise CliError(str(exc)) from None


def command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    func: Callable[[argparse.Namespace], int],
    help_text: str,
) -> argparse.ArgumentParser:
    """A subcommand that runs ``func`` with the parsed arguments."""
    p = sub.add_parser(name, help=help_text)
    p.set_defaults(func=func)
    return p


def checkpoint_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """An optional ``checkpoint`` argument (the shipped SDT-RNN when left out)."""
    parser.add_argument("checkpoint", nargs="?", help=f"{what} (default: the shipped SDT-RNN)")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def probability(text: str) -> float:
    """A threshold on a probability: a number in (0, 1]."""
    value = float(text)
    if not 0.0 < value <= 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


def non_negative(text: str) -> float:
    """A finite number of at least 0 (a penalty's weight)."""
    value = float(text)
    if not 0.0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of at least 0, got {text}")
    return value


def rounded(value: object, digits: int = 2) -> object:
    """Floats rounded for printing, inside dicts and lists too."""
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v, digits) for v in value]
    return value


def json_text(value: object, digits: int = 2, ascii_only: bool = True) -> str:
    """``value`` as indented JSON, its floats ``rounded`` to ``digits``."""
    return json.dumps(rounded(value, digits), indent=2, ensure_ascii=ascii_only)


def add_config_flags(
    parser: argparse.ArgumentParser, *configs: type[Any], skip: Collection[str] = ()
) -> None:
    """One flag per plain-valued field of the dataclasses ``configs`` (not in ``skip``); a
    name in several of them is one flag, made from its first."""
    made = set(skip)
    for config in configs:
        for f in dataclasses.fields(config):
            if f.name in made or not isinstance(f.default, bool | int | float | str):
                continue
            made.add(f.name)
            _add_flag(parser, f)


def _add_flag(parser: argparse.ArgumentParser, f: dataclasses.Field[Any]) -> None:
    meta = f.metadata
    flag = meta.get("flag", "--" + f.name.replace("_", "-"))
    help_text = meta.get("help")
    if isinstance(f.default, bool):
        action = _recording(
            argparse._StoreFalseAction if meta.get("invert") else argparse._StoreTrueAction
        )
        parser.add_argument(flag, dest=f.name, action=action, help=help_text)
        return
    shown = f"default: {f.default}"
    parser.add_argument(
        flag,
        dest=f.name,
        action=_recording(argparse._StoreAction),
        type=type(f.default),
        default=f.default,
        choices=meta.get("choices"),
        help=f"{help_text} ({shown})" if help_text else shown,
    )


def _recording(base: type[argparse.Action]) -> type[argparse.Action]:
    """The action ``base`` that also records its field in the namespace's ``given`` set,
    so a command tells a setting typed on the command line from its default."""

    class Recording(base):  # type: ignore[valid-type, misc]
        def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
            super().__call__(parser, namespace, values, option_string)
            namespace.given = {*getattr(namespace, "given", ()), self.dest}

    return Recording


def given_settings(args: argparse.Namespace, config: type[Any]) -> dict[str, Any]:
    """The fields of ``config`` typed on the command line, with their values."""
    names = {f.name for f in dataclasses.fields(config)}
    return {k: getattr(args, k) for k in getattr(args, "given", ()) if k in names}


def config_from(args: argparse.Namespace, config: type[T], **values: Any) -> T:
    """``config`` built from the parsed flags of its fields, plus ``values``."""
    names = {f.name for f in dataclasses.fields(config)}  # type: ignore[arg-type]
    given = {k: v for k, v in vars(args).items() if k in names}
    return config(**{**given, **values})


def data_option(
    parser: argparse.ArgumentParser, many: bool = False, default: str = "flickr8k"
) -> None:
    """``--source`` (repeatable with ``many``): a captioned collection
    (``model.data.sources``); ``--data``: a Flickr8k-layout folder, the older spelling."""
    mixing = " (repeatable; =WEIGHT: its captions drawn WEIGHT times an epoch)" if many else ""
    parser.add_argument(
        "--source",
        action="append",
        metavar="SOURCE[=WEIGHT]" if many else "SOURCE",
        help="flickr8k, cc-web, a Flickr8k-layout or features folder, or a captions file "
        f"of your photos{mixing} (default: {default})",
    )
    parser.add_argument("--data", type=Path, help="a Flickr8k-layout folder (= --source DIR)")
    parser.set_defaults(default_sources=default)


def sources_of(args: argparse.Namespace) -> list[Source]:
    """``--source``/``--data``'s collections, else the command's defaults the data folder holds."""
    from groundsearch.model.data import DatasetError
    from groundsearch.model.data.sources import NAMED, parse_source

    texts = list(args.source or [])
    if args.data:
        texts.append(str(args.data))
    data_dir = get_settings().data_dir
    if not texts:  # the defaults: those the data folder holds (an error if none)
        defaults = args.default_sources.split(",")
        texts = [t for t in defaults if (data_dir / NAMED.get(t, t)).exists()] or defaults
    with user_errors(DatasetError):
        return [parse_source(t, data_dir) for t in texts]


def source_of(args: argparse.Namespace) -> Source:
    """The one collection of ``--source``/``--data`` (CliError when several are named)."""
    sources = sources_of(args)
    if len(sources) != 1:
        raise CliError(f"this command reads one collection, not {len(sources)}")
    return sources[0]


def data_root(args: argparse.Namespace) -> Path:
    """The folder of a command's one Flickr8k-layout collection (CliError for another kind)."""
    source = source_of(args)
    if source.kind != "flickr8k":
        raise CliError(f"this command reads a Flickr8k-layout folder; {source.name} is not one")
    return source.path


def checkpoint_path(args: argparse.Namespace) -> Path:
    """The ``checkpoint`` argument, or the shipped SDT-RNN."""
    return Path(args.checkpoint) if args.checkpoint else get_settings().default_checkpoint


def make_parser(use_cache: bool = True) -> Parser:
    """The dependency parser from the settings' model and cache folders."""
    from groundsearch.model.runtime.parsing import Parser

    return Parser(**get_settings().parser_options(use_cache))


def loaded_model(
    args: argparse.Namespace, concept_weight: float | None = None
) -> tuple[JointEmbedder | KCCAModel, FeatureExtractor, TreesFn]:
    """The ``checkpoint``'s model, its feature extractor and text parse (over their caches)."""
    from groundsearch.model.runtime.checkpoints import load_checkpoint
    from groundsearch.model.runtime.images.features import FeatureExtractor
    from groundsearch.model.training.corpus import text_trees

    parser = make_parser()
    model = load_checkpoint(checkpoint_path(args), parser.version, concept_weight=concept_weight)
    extractor = FeatureExtractor.for_identity(model.backbone, cache_dir=get_settings().cache_dir)
    return model, extractor, text_trees(parser)
