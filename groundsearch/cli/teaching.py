"""``groundsearch teach``: your captioned photos to a served model, in one command.

    groundsearch teach ~/shop/captions.tsv      # train, refit, compare, install if better
    groundsearch teach --restore                # serve the shipped model again

Stages, each a command of its own run in this process (output in the set's ``teach.log``):
your photos' features cached; ``train --init`` from the served model on its defaults; what
reads the space refitted as ``make refit`` does (the word tagger reads CNN features, so the
served one is kept), the caption decoder going on from the served one; then the two models
compared on your held-out photos (the captions file's ``test`` split) and on the shipped
collections' (``ELSEWHERE``). When no fine-tuning epoch beats the served model on the mixed
dev, it stops there. The new set is installed (``common.model_sets``) only when it is better
beyond noise on your photos (the lower end of the ``LEVEL`` interval of the rsum's gain above
0, a paired bootstrap) and no more than ``NOISE`` rsum worse elsewhere. Until then nothing is
written but the staging folder (removed on any error) and the feature and parse caches.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from groundsearch.cli.common import CliError, command, make_parser, positive_int, user_errors
from groundsearch.cli.training import FINE_TUNE_MIX
from groundsearch.common import model_sets
from groundsearch.common.files import write_json
from groundsearch.common.settings import get_settings

COMMANDS = ("teach",)
#: The fewest photos your collection needs in each of its dev and test splits.
MIN_SPLIT_PHOTOS = 5
#: How much worse (rsum) the new model may be on the shipped collections' held-out photos.
NOISE = 2.0
#: The interval of your photos' rsum gain whose lower end must be above 0.
LEVEL = 0.9
#: The shipped collections' held-out photos the two models are compared on.
ELSEWHERE = (("flickr8k", "test"), ("cc-web", "dev"))
#: The caption decoder's step as it goes on from the served one (a quarter of a new one's,
#: as ``train --init``'s) and its epochs: on the worked example a second epoch never beat
#: the first on the mixed dev (docs/RESULTS.md, "Your own collection").
DECODER_LR = 5e-4
DECODER_EPOCHS = 1


def cmd_teach(args: argparse.Namespace) -> int:
    s = get_settings()
    taught = Path(s.taught_dir)
    if args.restore:
        was = model_sets.current(taught)
        model_sets.restore(taught)
        print(f"serving the shipped model{f' (was: {was.name})' if was else ''}")
        return 0
    if not args.captions:
        raise CliError("name your captions file (photo<TAB>caption lines), or --restore")
    captions = Path(args.captions).expanduser().resolve()
    name = args.name or f"{captions.parent.name or 'mine'}-{datetime.now():%Y%m%d-%H%M%S}"
    try:
        model_sets.check_name(taught, name)
    except ValueError as exc:
        raise CliError(f"--name: {exc}") from None
    own = _check_collection(captions)
    served = s.default_checkpoint
    staging = taught / f".staging-{name}"
    # stopped (kill, docker stop), it removes its staging folder as on any error
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    taught.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        with (staging / "teach.log").open("w", encoding="utf-8") as log:
            record = _teach(args, captions, own, served, staging, log)
        installed = record["installed"]
        if installed:
            model_sets.install(taught, staging, name)
        if record["comparison"]:
            print(_table(record))
        if installed:
            print(
                f"installed: `groundsearch serve` now serves {taught / name} (/ready: "
                f"'taught: {name}'; `groundsearch teach --restore` goes back)"
            )
            return 0
        print(f"kept the served model: {record['why']}")
        return 1
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _check_collection(captions: Path) -> dict[str, int]:
    """Your collection's photos per split; CliError (nothing written) for a missing file,
    bad lines, missing photos or too few photos to hold some out."""
    from groundsearch.model.data.caption_files import CaptionFileError, read_caption_file
    from groundsearch.model.data.sources import hash_split

    with user_errors(CaptionFileError):
        found = read_caption_file(captions)
    if found.problems:
        raise CliError(
            f"{len(found.problems)} line(s) of {captions} are not photo<TAB>caption; "
            f"the first: {found.problems[0]}"
        )
    missing = [p for p in found.captions if not (captions.parent / p).is_file()]
    if missing:
        raise CliError(
            f"{len(missing)} photo(s) of {captions} are not beside it: "
            + ", ".join(missing[:3])
            + (" …" if len(missing) > 3 else "")
        )
    splits = {"train": 0, "dev": 0, "test": 0}
    for photo in found.captions:
        splits[hash_split(photo)] += 1
    if min(splits["dev"], splits["test"]) < MIN_SPLIT_PHOTOS:
        raise CliError(
            f"{captions} has {len(found.captions)} photos: {splits['dev']} for dev and "
            f"{splits['test']} for test (one in ten each, by a hash of the name); teaching "
            f"needs {MIN_SPLIT_PHOTOS} of each to choose and to judge the new model, so "
            "about 60 photos or more"
        )
    return splits


def _teach(
    args: argparse.Namespace,
    captions: Path,
    own: Mapping[str, int],
    served: Path,
    staging: Path,
    log: Any,
) -> dict[str, Any]:
    """Every stage into ``staging``; the comparison and the verdict."""
    from groundsearch.model.runtime.checkpoints import load_checkpoint

    ckpt = staging / model_sets.CHECKPOINT
    src = ["--source", str(captions)]
    shipped = [x for name, _ in ELSEWHERE for x in ("--source", name)]
    # the decoder goes on from the served one on a share of the shipped collections'
    # photos beside yours, as train --init mixes them in
    mixed = [x for name, _ in ELSEWHERE for x in ("--source", f"{name}={FINE_TUNE_MIX:g}")]
    hub, tagger = str(staging / "hubness.npz"), str(staging / "vector_tagger.npz")
    backbone = load_checkpoint(served).backbone  # the features the served model reads
    stages: list[tuple[str, list[str]]] = [
        ("your photos' features", ["features", *src, "--backbone", backbone]),
        ("the joint model", ["train", "--init", str(served), *src, "--out", str(ckpt),
                             *(["--epochs", str(args.epochs)] if args.epochs else [])]),
        ("the vector tagger", ["train-tagger", "--checkpoint", str(ckpt), "--on", "vectors",
                               *shipped, *src, "--out", tagger]),
        ("the hubness correction", ["fit-hubness", str(ckpt), *shipped, *src, "--out", hub]),
        ("the short queries' fusion", ["fit-fusion", str(ckpt), *shipped, *src,
                                       "--hubness", hub, "--tagger", tagger,
                                       "--out", str(staging / "fusion.json")]),
        ("the relevance", ["fit-relevance", str(ckpt), "--hubness", hub, "--tagger", tagger,
                           "--fusion", "none", "--out", str(staging / "relevance.json")]),
        ("the caption decoder", ["train-decoder", "--checkpoint", str(ckpt), *mixed, *src,
                                 "--init", str(get_settings().default_decoder),
                                 "--epochs", str(args.decoder_epochs), "--lr", f"{DECODER_LR:g}",
                                 "--select", "cider", "--no-dev-scores",
                                 "--out", str(staging / "decoder.pt")]),
    ]  # fmt: skip
    # the word tagger reads the CNN's features, not the space: the served one goes along
    shutil.copy2(get_settings().space_dir / "word_tagger.npz", staging / "word_tagger.npz")
    total = len(stages) + 1
    timings: dict[str, float] = {}
    comparison: dict[str, Any] = {}
    installed, why = False, ""
    for i, (what, argv) in enumerate(stages, 1):
        timings[what] = _stage(f"[{i}/{total}] {what}", partial(_run, argv, log))
        if argv[0] == "train" and _kept_as_it_was(ckpt):
            why = (
                "no epoch of fine-tuning beat the served model on the mixed dev (your dev "
                "photos beside Flickr8k's and cc-web's): nothing new to serve"
            )
            break
    else:

        def compare() -> None:
            comparison.update(_compare(served, ckpt, captions))

        timings["the comparison"] = _stage(f"[{total}/{total}] old and new compared", compare)
        installed, why = verdict(comparison)
    record = {
        "captions": str(captions),
        "photos": dict(own),
        "init": str(served),
        "taught_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": {k: round(v, 1) for k, v in timings.items()},
        "comparison": comparison,
        "installed": installed,
        "why": why,
    }
    write_json(staging / model_sets.RECORD, record)
    return record


def _kept_as_it_was(checkpoint: Path) -> bool:
    """Whether ``train --init`` kept the model it started from (its summary's best epoch 0)."""
    summary = json.loads(checkpoint.with_suffix(".json").read_text(encoding="utf-8"))
    return summary.get("best_epoch") == 0


def _stage(title: str, work: Callable[[], object]) -> float:
    print(f"{title} …", file=sys.stderr, flush=True)
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    print(f"{title}: done in {seconds:.0f} s", file=sys.stderr, flush=True)
    return seconds


def _run(argv: list[str], log: Any) -> None:
    """One groundsearch command in this process, its output into ``log``; CliError if it fails."""
    from groundsearch.cli import main

    log.write(f"$ groundsearch {' '.join(argv)}\n")
    log.flush()
    with contextlib.redirect_stdout(log):
        status = main(argv)
    if status != 0:
        raise CliError(f"`groundsearch {argv[0]}` failed (exit {status}): nothing was installed")


def _compare(old: Path, new: Path, captions: Path) -> dict[str, Any]:
    """The two models' rsums and the gain's interval on your held-out photos and on the
    shipped collections' (``ELSEWHERE``)."""
    from groundsearch.model.data.sources import parse_source
    from groundsearch.model.training.experiment import compare_checkpoints

    s = get_settings()
    parser = make_parser()
    out: dict[str, Any] = {}
    for label, spec, split in (
        ("yours", str(captions), "test"),
        *((name, name, split) for name, split in ELSEWHERE),
    ):
        source = parse_source(spec, s.data_dir)
        if not source.path.exists():
            continue
        r = compare_checkpoints(old, new, source, parser, s.cache_dir, split, level=LEVEL)
        gain = r["second_minus_first"]["rsum"]
        out[label] = {
            "split": split,
            "photos": r["images"],
            "old": round(r["first"]["rsum"], 2),
            "new": round(r["second"]["rsum"], 2),
            "gain": round(gain["difference"], 2),
            "interval": [round(x, 2) for x in gain["ci95"]],
        }
    return out


def verdict(comparison: Mapping[str, Mapping[str, Any]]) -> tuple[bool, str]:
    """Whether the new model is to be served, and why: better beyond noise on your
    photos, no more than ``NOISE`` rsum worse on each other collection."""
    yours = comparison["yours"]
    low = yours["interval"][0]
    if low <= 0:
        return False, (
            f"not better beyond noise on your {yours['photos']} held-out photos (rsum "
            f"{yours['old']:.1f} → {yours['new']:.1f}; the gain's {LEVEL:.0%} interval "
            f"starts at {low:+.1f})"
        )
    for name, c in comparison.items():
        if name != "yours" and c["gain"] < -NOISE:
            return False, (
                f"{-c['gain']:.1f} rsum worse on {name} {c['split']} ({c['old']:.1f} → "
                f"{c['new']:.1f}; at most {NOISE:g} allowed)"
            )
    return True, f"better on your photos ({yours['gain']:+.1f} rsum), no worse elsewhere"


def _table(record: Mapping[str, Any]) -> str:
    lines = ["| photos | old rsum | new rsum | gain (interval) |", "|---|---|---|---|"]
    for name, c in record["comparison"].items():
        lo, hi = c["interval"]
        lines.append(
            f"| {name} {c['split']} ({c['photos']}) | {c['old']:.1f} | {c['new']:.1f} | "
            f"{c['gain']:+.1f} ({lo:+.1f} … {hi:+.1f}) |"
        )
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = command(sub, "teach", cmd_teach, "teach the served model your captioned photos")
    p.add_argument("captions", nargs="?", help="your captions file (photo<TAB>caption lines)")
    p.add_argument("--name", help="the taught model's name (default: folder and time)")
    p.add_argument(
        "--epochs", type=positive_int, help="fine-tuning epochs (default: train --init's)"
    )
    p.add_argument(
        "--decoder-epochs",
        type=positive_int,
        default=DECODER_EPOCHS,
        help=f"epochs of the caption decoder, on from the served one ({DECODER_EPOCHS})",
    )
    p.add_argument(
        "--restore", action="store_true", help="serve the shipped model again (sets stay)"
    )
