"""The Flickr8k results table (docs/RESULTS.md) from a folder of trained models.

    python bench/results_table.py runs/results                        # print markdown
    python bench/results_table.py runs/results --out docs/RESULTS_TABLE.md

Every ``RUNS_DIR/<name>.json`` training summary (written by ``groundsearch train``) is
a row, scored from ``RUNS_DIR/<name>.test.json`` (the output of ``groundsearch
evaluate RUNS_DIR/<name>.pt --split test``) or marked "not evaluated"; the published
Flickr8k figures follow (each checked against the source named in ``PUBLISHED``). Two
more tables give, for the same rows, R@20/R@50, median beside mean rank and 95 %
bootstrap intervals, and image search for captions with and without a verb (a test
result written before those were measured shows "–"). The last table gives the
``groundsearch train`` command of each row, rebuilt from its summary (and the
checkpoint, for what the summary does not record); options it cannot recover are named
in a ``# unknown:`` comment.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

from groundsearch.model.runtime.encoders.registry import ENCODERS, OPTIONS
from groundsearch.model.runtime.joint import JointConfig
from groundsearch.model.training.kcca import KCCAConfig
from groundsearch.model.training.loop import TrainConfig

sys.path.insert(0, str(Path(__file__).parent))
from common import markdown_table

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

Triple = tuple[float, float, float]
#: Published Flickr8k 1K-test figures: label, i2t R@1/5/10, t2i R@1/5/10, the median
#: ranks (i2t, t2i) where a source here gives them. Sources, as checked (docs/RESULTS.md,
#: "Published figures, checked"): the Karpathy, Joulin & Fei-Fei (2014) Table 1 rows as
#: tabulated in Paranioar/Awesome_Matching_Pretraining_Transfering (README, Flickr8K);
#: Kiros et al.'s with their median ranks as quoted in linxd5/VSE_Pytorch (README).
PUBLISHED: list[tuple[str, Triple, Triple, tuple[float, float] | None]] = [
    (
        "SDT-RNN, AlexNet features, as reported by Karpathy et al. 2014",
        (4.5, 18.0, 28.6),
        (6.1, 18.5, 29.0),
        None,
    ),
    (
        "SDT-RNN on RCNN object detections (Karpathy et al. 2014)",
        (6.0, 22.7, 34.0),
        (6.6, 21.6, 31.7),
        None,
    ),
    ("Kiros et al. 2014, LSTM, VGG features", (18.0, 40.9, 55.0), (12.5, 37.0, 51.5), (8, 10)),
    ("Karpathy & Fei-Fei 2015, BRNN", (16.5, 40.6, 54.2), (11.8, 32.1, 44.7), None),
]
#: Wider recall, both ranks and 95 % bootstrap intervals (``ci95`` of a test result).
WIDE_HEADER = [
    "model",
    "i2t R@20",
    "i2t R@50",
    "i2t med r",
    "i2t mean r",
    "t2i R@20",
    "t2i R@50",
    "t2i med r",
    "t2i mean r",
    "i2t R@10 95% CI",
    "t2i R@10 95% CI",
    "rsum 95% CI",
]
#: Image search by caption group (``t2i_groups`` of a test result).
GROUPS = {"with_verb": "with a verb", "without_verb": "without a verb"}
GROUP_HEADER = [
    "model",
    *(
        f"{label}: {col}"
        for label in GROUPS.values()
        for col in ("captions", "R@1", "R@5", "R@10", "med r")
    ),
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
    ("--image-hidden", "joint.image_hidden", OPTION),
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
    # the shared fields and every encoder's options (one flat namespace, as stored)
    "joint": {
        f.name: f.default
        for cls in (JointConfig, *OPTIONS)
        for f in fields(cls)
        if f.name != "options"
    },
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


#: The second collection's table: each row's ``<name>.cc-web.json`` (``groundsearch
#: evaluate <name>.pt --source cc-web --split dev``) beside its Flickr8k test rsum.
WEB_HEADER = [
    "model",
    "trained on",
    "Flickr8k test rsum",
    "cc-web i2t R@1",
    "cc-web i2t R@5",
    "cc-web i2t R@10",
    "cc-web t2i R@1",
    "cc-web t2i R@5",
    "cc-web t2i R@10",
    "cc-web rsum",
    "cc-web t2i med r",
]


def web_row(label: str, summary: dict, test: dict | None, web: dict | None) -> list[str]:
    """A row of the side-by-side table: Flickr8k test rsum, cc-web dev's R@K and rsum."""
    trained = ", ".join(summary.get("sources") or ["flickr8k"])
    cells = [label, trained, _fmt(test.get("rsum")) if test else DASH]
    if web is None:
        return [*cells, "not evaluated", *[DASH] * (len(WEB_HEADER) - len(cells) - 1)]
    for side in ("i2t", "t2i"):
        cells += [_fmt(web.get(side, {}).get(k)) for k in ("R@1", "R@5", "R@10")]
    return [*cells, _fmt(web.get("rsum")), _rank(web.get("t2i", {}).get("median_rank"))]


def published_rows() -> list[list[str]]:
    """The published figures, rsum computed from them; a dash where they report nothing."""
    rows = []
    for label, i2t, t2i, medians in PUBLISHED:
        rsum = round(sum(i2t) + sum(t2i), 1)
        med_i2t, med_t2i = (_rank(m) for m in medians) if medians else (DASH, DASH)
        cells = [f"*{label}* (published)", *map(_fmt, i2t), med_i2t, *map(_fmt, t2i), med_t2i]
        rows.append([*cells, _fmt(rsum), *[DASH] * (len(HEADER) - len(cells) - 1)])
    return rows


def _span(value: object) -> str:
    """A ``[low, high]`` interval as "low–high", or a dash."""
    if isinstance(value, list | tuple) and len(value) == 2:
        low, high = value
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            return f"{low:.1f}–{high:.1f}"
    return DASH


def _block(test: dict | None, *keys: str) -> dict:
    """``test[keys[0]][keys[1]]…`` when every level is a dict, else an empty dict."""
    node: object = test
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def wide_row(label: str, test: dict | None) -> list[str]:
    """R@20/R@50, median and mean rank of both directions and the 95 % intervals."""
    cells = [label]
    for side in ("i2t", "t2i"):
        block = _block(test, side)
        cells += [_fmt(block.get("R@20")), _fmt(block.get("R@50"))]
        cells += [_rank(block.get("median_rank")), _fmt(block.get("mean_rank"))]
    ci = _block(test, "ci95")
    cells += [_span(_block(ci, "i2t").get("R@10")), _span(_block(ci, "t2i").get("R@10"))]
    return [*cells, _span(ci.get("rsum"))]


def group_row(label: str, test: dict | None) -> list[str]:
    """Image search (t2i) of the captions with and without a verb."""
    cells = [label]
    for group in GROUPS:
        block = _block(test, "t2i_groups", group)
        count = block.get("captions")
        cells.append(str(count) if isinstance(count, int) else DASH)
        cells += [_fmt(block.get(k)) for k in ("R@1", "R@5", "R@10")]
        cells.append(_rank(block.get("median_rank")))
    return cells


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
    joint_names = _joint_names(summary.get("encoder"))
    unknown, notes = [], []
    used: set[str] = set()
    for flag, key, kind in KCCA_FLAGS if kcca else JOINT_FLAGS:
        section, _, name = key.rpartition(".")
        used.add(key)
        scope = source[section] if section else source
        if kind == OPTION and name not in scope and name in DEFAULTS.get(section, {}):
            continue  # an option added after this run: it ran at the default
        if section == "joint" and name not in scope and name not in joint_names:
            continue  # another encoder's option (newer summaries hold only their own)
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
    for text in summary.get("sources") or []:
        words += ["--source", text]
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


def _joint_names(encoder: object) -> set[str]:
    """The summary's ``joint`` keys of ``encoder``: the shared ones and its options."""
    spec = ENCODERS.get(str(encoder))
    own = fields(spec.options) if spec is not None else ()
    return {f.name for f in (*fields(JointConfig), *own)}


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


def render(runs: Path) -> str:
    """Both tables of ``runs`` as one markdown document."""
    found = load_runs(runs)
    if not found:
        raise SystemExit(f"no training summaries (<name>.json) in {runs}")
    rows, wide, groups, commands, web = [], [], [], [], []
    for name, summary, test in found:
        label = name if name == summary["encoder"] else f"{name} ({summary['encoder']})"
        rows.append(_row(label, test, summary.get("train_seconds")))
        web_path = runs / f"{name}.cc-web.json"
        web.append(web_row(label, summary, test, _read(web_path) if web_path.is_file() else None))
        wide.append(wide_row(label, test))
        groups.append(group_row(label, test))
        command = train_command(summary, runs / f"{name}.pt")
        commands.append([label, f"`{command}`"])
    lines = [
        f"<!-- made by: python bench/results_table.py {runs} -->",
        "",
        "### Flickr8k test (1,000 images, 5,000 captions)",
        "",
        *markdown_table(HEADER, rows + published_rows()),
        "",
        "R@K in %; rsum is the sum of the six R@K. Sentence-sim mean rank: paper §6.1 (lower "
        "is better). Expert ρ: Spearman × 100 with the Flickr8k expert judgments. STS-B r and "
        "SICK-R r: Pearson × 100 of caption-vector cosine with the gold scores (no trained "
        "regressor). Train time: the summary's train_seconds (parsing and CNN features "
        f"excluded). {DASH}: not measured or not reported.",
        "",
        "### Flickr8k test and cc-web dev, side by side",
        "",
        *markdown_table(WEB_HEADER, web),
        "",
        "cc-web dev: 1,000 web photos with one alt-text each; a caption ranks the 1,000 "
        "photos (t2i), a photo the 1,000 captions (i2t). Harder than Flickr8k's five-caption "
        "protocol and not comparable with it: never summed. Scored by `groundsearch evaluate "
        f"{runs}/<name>.pt --source cc-web --split dev --no-sentence-benchmarks`.",
        "",
        "### Wider recall, mean rank, 95 % intervals",
        "",
        *markdown_table(WIDE_HEADER, wide),
        "",
        "R@20 and R@50 as in Dufour et al.'s Table 3 (not in rsum). Intervals: 2.5th–97.5th "
        "percentiles of 1,000 bootstrap resamples of the test photos (each with its five "
        "captions; seed 0), ranks computed once against the whole gallery (Merkx & Frank "
        f"2019 report such intervals). {DASH}: a test result written before these were "
        "measured.",
        "",
        "### Image search by caption: with and without a verb (paper §6.6)",
        "",
        *markdown_table(GROUP_HEADER, groups),
        "",
        "A caption has a verb when its stanza parse tags a word VERB (auxiliaries and "
        'copulas are AUX: "A dog is in the snow" has none); each caption still ranks all '
        "1,000 photos.",
        "",
        "### Training commands",
        "",
        *markdown_table(["model", "command"], commands),
        "",
        f"Each model is then scored with `groundsearch evaluate {runs}/<name>.pt --split test "
        f"> {runs}/<name>.test.json`.",
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
