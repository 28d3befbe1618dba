"""The Flickr8k results table (docs/RESULTS.md) from a folder of trained models.

    python bench/results_table.py runs/results                        # print markdown
    python bench/results_table.py runs/results --out docs/RESULTS_TABLE.md

Every ``RUNS_DIR/<name>.json`` training summary (written by ``groundsearch train``) is
a row, scored from ``RUNS_DIR/<name>.test.json`` (the output of ``groundsearch
evaluate RUNS_DIR/<name>.pt --split test``) or marked "not evaluated"; the published
Flickr8k figures of GUIDE §3 follow. A second table gives the ``groundsearch train``
command of each row, rebuilt from its summary (and the checkpoint, for what the summary
does not record); options it cannot recover are named in a ``# unknown:`` comment.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from groundsearch.model.runtime.joint import JointConfig
from groundsearch.model.training.kcca import KCCAConfig
from groundsearch.model.training.loop import TrainConfig

#: Row order; encoders not listed come after, by name.
ORDER = ["sdt-rnn", "dt-rnn", "bow", "chain-rnn", "kcca", "lstm", "gru", "char-gru", "tree-lstm"]
HEADER = [
    "model",
    "i2t R@1",
    "i2t R@5",
    "i2t R@10",
    "i2t med r",
    "t2i R@1",
    "t2i R@5",
    "t2i R@10",
    "t2i med r",
    "rsum",
    "sentence-sim mean rank",
    "expert ρ",
    "STS-B r",
    "SICK-R r",
    "train time (min)",
]
DASH = "–"

#: Published Flickr8k 1K-test figures (GUIDE §3): i2t R@1/5/10, t2i R@1/5/10.
PUBLISHED: list[tuple[str, tuple[float, float, float], tuple[float, float, float]]] = [
    ("SDT-RNN, as reported by Karpathy et al. 2014", (6.0, 22.7, 34.0), (6.6, 21.6, 31.7)),
    ("Kiros et al. 2014, LSTM, VGG features", (18.0, 40.9, 55.0), (12.5, 37.0, 51.5)),
    ("Karpathy & Fei-Fei 2015, BRNN", (16.5, 40.6, 54.2), (11.8, 32.1, 44.7)),
]

# How a summary value becomes a flag: its value, or the bare flag when it is True/False;
# OPTION: its value (a True one: the bare flag), only when it is not the code's default
# (options added later, so that older runs' commands stay as they were).
VALUE, IF_TRUE, IF_FALSE, OPTION = "value", "if-true", "if-false", "option"
#: ``groundsearch train`` flags of a joint model, in ``--help`` order, and their source:
#: ``joint.*`` / ``train.*`` in the summary, ``model.*`` from the summary or checkpoint.
JOINT_FLAGS = [
    ("--encoder", "joint.encoder", VALUE),
    ("--hidden", "joint.hidden", VALUE),
    ("--rnn-hidden", "joint.rnn_hidden", VALUE),
    ("--relation-min-count", "joint.relation_min_count", VALUE),
    ("--max-child-order", "joint.max_child_order", OPTION),
    ("--unweighted", "joint.unweighted", OPTION),
    ("--nonlinearity", "joint.nonlinearity", OPTION),
    ("--char-cell", "joint.char_cell", OPTION),
    ("--char-pooling", "joint.char_pooling", OPTION),
    ("--sqrt-features", "joint.sqrt_features", IF_TRUE),
    ("--tune-words", "joint.freeze_words", IF_FALSE),
    ("--epochs", "train.epochs", VALUE),
    ("--batch-size", "train.batch_size", VALUE),
    ("--loss", "train.loss", OPTION),
    ("--margin", "train.margin", VALUE),
    ("--hardest", "train.hardest", IF_TRUE),
    ("--warmup", "train.warmup", VALUE),
    ("--normalize", "train.normalize", IF_TRUE),
    ("--optimizer", "train.optimizer", VALUE),
    ("--lr", "train.lr", VALUE),
    ("--lr-min", "train.lr_min", OPTION),
    ("--weight-decay", "train.weight_decay", VALUE),
    ("--cycles", "train.cycles", VALUE),
    ("--ensemble", "train.ensemble", IF_TRUE),
    ("--ensemble-best", "train.ensemble_best", OPTION),
    ("--half", "model.half", IF_TRUE),
    ("--backbone", "model.backbone", VALUE),
    ("--ten-crop", "model.ten_crop", IF_TRUE),
    ("--seed", "train.seed", VALUE),
]
KCCA_FLAGS = [
    ("--encoder", "encoder", VALUE),
    ("--landmarks", "kcca.n_landmarks", VALUE),
    ("--half", "model.half", IF_TRUE),
    ("--backbone", "model.backbone", VALUE),
    ("--ten-crop", "model.ten_crop", IF_TRUE),
    ("--seed", "kcca.seed", VALUE),
]
#: Summary keys with no flag of their own: fine when at the code's default.
NO_FLAG = {
    "joint": {"init_noise", "image_dim", "seed"},  # image_dim: set by the backbone
    "train": {"adagrad_reset"},
    "kcca": {"dims", "regs"},
}
DEFAULTS = {
    "joint": {f.name: f.default for f in fields(JointConfig)},
    "train": {f.name: f.default for f in fields(TrainConfig)},
    "kcca": {f.name: f.default for f in fields(KCCAConfig)},
}


def _fmt(value: object, digits: int = 1) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return DASH
    return f"{value:.{digits}f}"


def _rank(value: object) -> str:
    """A median rank: whole numbers without decimals (10), halves as they are (14.5)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value == int(value):
        return str(int(value))
    return _fmt(value)


def _score(block: object, key: str) -> str:
    """``block[key]`` of a benchmark result, or a dash when skipped or absent."""
    return _fmt(block.get(key)) if isinstance(block, dict) else DASH


def _row(label: str, test: dict | None, train_seconds: object) -> list[str]:
    minutes = train_seconds / 60 if isinstance(train_seconds, int | float) else None
    if test is None:
        return [label, "not evaluated", *[DASH] * (len(HEADER) - 3), _fmt(minutes)]
    cells = [label]
    for side in ("i2t", "t2i"):
        block = test.get(side, {})
        cells += [_fmt(block.get(k)) for k in ("R@1", "R@5", "R@10")]
        cells.append(_rank(block.get("median_rank")))
    cells += [
        _fmt(test.get("rsum")),
        _fmt(test.get("sentence_similarity_mean_rank")),
        _score(test.get("expert_spearman"), "spearman"),
        _score(test.get("sts_b"), "pearson"),
        _score(test.get("sick_r"), "pearson"),
        _fmt(minutes),
    ]
    return cells


def published_rows() -> list[list[str]]:
    """The GUIDE §3 figures, rsum computed from them; a dash where they report nothing."""
    rows = []
    for label, i2t, t2i in PUBLISHED:
        rsum = round(sum(i2t) + sum(t2i), 1)
        cells = [f"*{label}* (published)", *map(_fmt, i2t), DASH, *map(_fmt, t2i), DASH]
        rows.append([*cells, _fmt(rsum), *[DASH] * (len(HEADER) - len(cells) - 1)])
    return rows


def _flag_value(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _checkpoint_facts(path: Path) -> dict[str, object]:
    """Backbone (as the feature extractor names it) and float16 storage of a checkpoint."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # unreadable: its options stay unknown
        print(f"cannot read {path}: {exc}", file=sys.stderr)
        return {}
    facts = {"backbone": state["backbone"]} if "backbone" in state else {}
    vectors = state.get("vocab", {}).get("vectors")
    if vectors is not None:
        facts["half"] = "float16" in str(vectors.dtype)
    return facts


def _model_facts(summary: dict, checkpoint: Path) -> dict[str, object]:
    """``model.*`` options: backbone, ten_crop and half, from the summary when it records
    them, else from the checkpoint beside it; absent when neither has them."""
    recorded = {**summary.get("joint", {}), **summary}
    facts = {k: recorded[k] for k in ("backbone", "half") if k in recorded}
    if len(facts) < 2 and checkpoint.is_file():
        facts = {**_checkpoint_facts(checkpoint), **facts}
    backbone = facts.get("backbone")
    if isinstance(backbone, str):
        name, crop, _ = backbone.partition("-10crop")
        facts["backbone"], facts["ten_crop"] = name, bool(crop) or bool(recorded.get("ten_crop"))
    return facts


def train_command(summary: dict, out: Path, checkpoint: Path | None = None) -> str:
    """The ``groundsearch train`` command that makes ``summary``'s model at ``out``, with
    a trailing comment naming any option it could not recover."""
    kcca = summary.get("encoder") == "kcca"
    source = {"encoder": summary.get("encoder"), "model": _model_facts(summary, checkpoint or out)}
    for section in ("kcca",) if kcca else ("joint", "train"):
        source[section] = summary.get(section, {})
    words = ["groundsearch", "train", "--out", str(out)]
    unknown, notes = [], []
    used: set[str] = set()
    for flag, key, kind in KCCA_FLAGS if kcca else JOINT_FLAGS:
        section, _, name = key.rpartition(".")
        used.add(key)
        scope = source[section] if section else source
        if kind == OPTION and name not in scope and name in DEFAULTS.get(section, {}):
            continue  # an option added after this run: it ran at the default
        if name not in scope:
            unknown.append(key)
            continue
        value = scope[name]
        if kind == OPTION:
            if _differs(value, DEFAULTS[section][name]):
                words += [flag] if value is True else [flag, _flag_value(value)]
            continue
        if kind == VALUE:
            words += [flag, _flag_value(value)]
        elif bool(value) == (kind == IF_TRUE):
            words.append(flag)
    for section in ("kcca",) if kcca else ("joint", "train"):
        for name, value in source[section].items():
            key = f"{section}.{name}"
            if key in used:
                continue
            if name not in NO_FLAG[section] and name not in DEFAULTS[section]:
                notes.append(f"unmapped {key}={value!r}")
            elif name == "seed" and section == "joint":
                if value != source["train"].get("seed"):
                    notes.append(f"joint.seed={value!r} differs from train.seed")
            elif name != "image_dim" and _differs(value, DEFAULTS[section].get(name)):
                notes.append(f"no flag sets {key}={value!r}")
    if unknown:
        notes.insert(0, "unknown: " + ", ".join(unknown))
    return " ".join(words) + (f"  # {'; '.join(notes)}" if notes else "")


def _differs(value: object, default: object) -> bool:
    if isinstance(default, tuple):
        return list(value) != list(default) if isinstance(value, list | tuple) else True
    return value != default


def _order(item: tuple[str, dict]) -> tuple[int, str]:
    name, summary = item
    encoder = summary.get("encoder", name)
    return (ORDER.index(encoder) if encoder in ORDER else len(ORDER), name)


def load_runs(runs: Path) -> list[tuple[str, dict, dict | None]]:
    """``(name, summary, test result or None)`` of every training summary in ``runs``,
    in table order."""
    found = {}
    for path in sorted(runs.glob("*.json")):
        if path.name.endswith(".test.json"):
            continue
        data = _read(path)
        if not isinstance(data, dict) or "train_seconds" not in data or "checkpoint" in data:
            print(f"skipping {path}: not a training summary", file=sys.stderr)
            continue
        found[path.stem] = data
    out = []
    for name, summary in sorted(found.items(), key=_order):
        test_path = runs / f"{name}.test.json"
        test = _read(test_path) if test_path.is_file() else None
        if test is not None and test.get("split") != "test":
            print(f"warning: {test_path} is of split {test.get('split')!r}", file=sys.stderr)
        if test is not None and test.get("encoder", summary["encoder"]) != summary["encoder"]:
            print(f"warning: {test_path} scores another encoder", file=sys.stderr)
        out.append((name, summary, test))
    return out


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"cannot read {path}: {exc}") from None


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def render(runs: Path) -> str:
    """Both tables of ``runs`` as one markdown document."""
    found = load_runs(runs)
    if not found:
        raise SystemExit(f"no training summaries (<name>.json) in {runs}")
    rows, commands = [], []
    for name, summary, test in found:
        label = name if name == summary["encoder"] else f"{name} ({summary['encoder']})"
        rows.append(_row(label, test, summary.get("train_seconds")))
        command = train_command(summary, runs / f"{name}.pt")
        commands.append([label, f"`{command}`"])
    lines = [
        f"<!-- made by: python bench/results_table.py {runs} -->",
        "",
        "### Flickr8k test (1,000 images, 5,000 captions)",
        "",
        *_table(HEADER, rows + published_rows()),
        "",
        "R@K in %; rsum is the sum of the six R@K. Sentence-sim mean rank: paper §6.1 (lower "
        "is better). Expert ρ: Spearman × 100 with the Flickr8k expert judgments. STS-B r and "
        "SICK-R r: Pearson × 100 of caption-vector cosine with the gold scores (no trained "
        "regressor). Train time: the summary's train_seconds (parsing and CNN features "
        f"excluded). {DASH}: not measured or not reported.",
        "",
        "### Training commands",
        "",
        *_table(["model", "command"], commands),
        "",
        f"Each model is then scored with `groundsearch evaluate {runs}/<name>.pt --split test "
        f"> {runs}/<name>.test.json`. Commands use the default `--data`.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, help="folder of <name>.json summaries and .test.json")
    ap.add_argument("--out", type=Path, help="markdown file to write (default: stdout)")
    args = ap.parse_args(argv)
    text = render(args.runs)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
