"""Reproducible training of the stanza English models from UD English-EWT.

Stanza's trainers run as subprocesses (fixed seeds, a log per stage), the lanes
``tokenize → mwt → pos → lemma`` and ``depparse`` side by side, each stage with a step
budget and a wall-clock cap; the models are then compacted to float16.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from groundsearch.model.runtime.parsing.parser import MODEL_FILES
from groundsearch.model.runtime.parsing.pretrain import ensure_pretrain

SHORTHAND = "en_ewt"
SEED = 1234


@dataclass(frozen=True)
class Stage:
    """One stanza trainer invocation."""

    name: str
    module: str
    args: tuple[str, ...]
    wall_limit_s: int
    #: For an annealing stage: (candidate file, model file, stage that trained it). The
    #: candidate replaces the model only if its best dev score is higher.
    promote: tuple[str, str, str] | None = None


def _ewt(ewt_dir: Path, split: str) -> str:
    return str(ewt_dir / f"en_ewt-ud-{split}.conllu")


def _tagger(lr: str, steps: str, *optim: str) -> tuple[str, ...]:
    """The POS tagger's hyperparameters (``optim``: flags after the optimiser's)."""
    # fmt: off
    return (
        "--share_hid", "--char_hidden_dim", "100", "--char_emb_dim", "50",
        "--batch_size", "50",
        "--optim", "adam", "--lr", lr, "--beta2", "0.95", *optim,
        "--max_steps", steps, "--eval_interval", "200", "--fix_eval_interval",
        "--max_steps_before_stop", "6000",
    )
    # fmt: on


def _parser(lr: str, steps: str) -> tuple[str, ...]:
    """The dependency parser's hyperparameters."""
    # fmt: off
    return (
        "--batch_size", "1000", "--hidden_dim", "200", "--num_layers", "2",
        "--deep_biaff_hidden_dim", "200",
        "--char_hidden_dim", "100", "--char_emb_dim", "50",
        "--optim", "adam", "--lr", lr, "--beta2", "0.95",
        "--no_second_optim", "--no_plateau",
        "--max_steps", steps, "--eval_interval", "250",
        "--max_steps_before_stop", "6000", "--no_checkpoint",
    )
    # fmt: on


def stages(ewt_dir: Path, work: Path, out: Path, pretrain: Path) -> dict[str, Stage]:
    """The trainer command lines, chosen for 2 CPU cores (see docs/PARSER.md)."""
    common = ("--lang", "en", "--shorthand", SHORTHAND, "--seed", str(SEED))
    data = work / "data"
    vectors = ("--wordvec_pretrain_file", str(pretrain))

    def on_ewt(name: str, *args: str, start: tuple[str, ...] = ()) -> tuple[str, ...]:
        """Train on EWT train, score on EWT dev into ``dev.<name>.conllu``."""
        # fmt: off
        return (
            *start,
            "--mode", "train",
            "--train_file", _ewt(ewt_dir, "train"),
            "--eval_file", _ewt(ewt_dir, "dev"),
            "--output_file", str(work / f"dev.{name}.conllu"),
            *args,
        )
        # fmt: on

    def saved(folder: Path, file: str) -> tuple[str, ...]:
        return ("--save_dir", str(folder), "--save_name", file, *common)

    def anneal(base: str, module: str, start: str, hyper: tuple[str, ...]) -> Stage:
        """The trainer of ``base`` again from its model, at a lower learning rate; the
        result replaces the model only if dev improves."""
        name = f"{base}-anneal"
        candidate, model = work / f"{base}.anneal.pt", out / MODEL_FILES[base]
        args = on_ewt(
            name, *vectors, *hyper, *saved(work, candidate.name), start=(start, str(model))
        )
        return Stage(name, module, args, 45 * 60, promote=(str(candidate), str(model), base))

    # fmt: off
    plan = (
        Stage(
            "tokenize",
            "stanza.models.tokenizer",
            (
                "--mode", "train",
                "--txt_file", str(data / "train.txt"),
                "--label_file", str(data / "train.toklabels"),
                "--mwt_json_file", str(data / "train-mwt.json"),
                "--dev_txt_file", str(data / "dev.txt"),
                "--dev_label_file", str(data / "dev.toklabels"),
                "--dev_conll_gold", _ewt(ewt_dir, "dev"),
                "--conll_file", str(work / "dev.tokenize.conllu"),
                "--steps", "8000", "--eval_steps", "500",
                *saved(out, MODEL_FILES["tokenize"]),
            ),
            wall_limit_s=20 * 60,
        ),
        Stage(
            "mwt",
            "stanza.models.mwt_expander",
            on_ewt(
                "mwt",
                "--gold_file", _ewt(ewt_dir, "dev"),
                "--num_epoch", "15",
                *saved(out, MODEL_FILES["mwt"]),
            ),
            wall_limit_s=10 * 60,
        ),
        Stage(
            "lemma",
            "stanza.models.lemmatizer",
            on_ewt(
                "lemma",
                "--num_epoch", "1",
                "--shorthand", SHORTHAND, "--seed", str(SEED),
                "--save_dir", str(out), "--save_name", MODEL_FILES["lemma"],
            ),
            wall_limit_s=15 * 60,
        ),
        Stage(
            "pos",
            "stanza.models.tagger",
            on_ewt("pos", *vectors, *_tagger("0.003", "6000"), *saved(out, MODEL_FILES["pos"])),
            wall_limit_s=75 * 60,
        ),
        Stage(
            "depparse",
            "stanza.models.parser",
            on_ewt(
                "depparse",
                *vectors,
                *_parser("0.003", "6500"),
                *saved(out, MODEL_FILES["depparse"]),
            ),
            wall_limit_s=100 * 60,
        ),
        anneal(
            "pos",
            "groundsearch.model.training.parser.anneal_tagger",
            "--init_from",
            _tagger("0.0006", "4000", "--no_second_optim"),
        ),
        anneal("depparse", "stanza.models.parser", "--continue_from", _parser("0.0006", "2500")),
    )
    # fmt: on
    return {stage.name: stage for stage in plan}


STAGE_ORDER = ("tokenize", "mwt", "pos", "pos-anneal", "lemma", "depparse", "depparse-anneal")
#: Two lanes run side by side, one core each: the parser needs nothing the others make.
LANES = (("tokenize", "mwt", "pos", "pos-anneal", "lemma"), ("depparse", "depparse-anneal"))


def prepare_tokenizer_data(ewt_dir: Path, work: Path) -> None:
    """Raw text, character labels and MWT dictionary for the tokenizer, from CoNLL-U."""
    from stanza.utils.datasets import conllu_to_text, prepare_tokenizer_data

    data = work / "data"
    data.mkdir(parents=True, exist_ok=True)
    for split in ("train", "dev"):
        txt = data / f"{split}.txt"
        conllu_to_text.convert_text(_ewt(ewt_dir, split), str(txt))
        labels, mwt = str(data / f"{split}.toklabels"), str(data / f"{split}-mwt.json")
        prepare_tokenizer_data.main([str(txt), _ewt(ewt_dir, split), "-o", labels, "-m", mwt])


def run_stage(stage: Stage, log_dir: Path) -> dict[str, object]:
    """Run one trainer with one thread; return its wall time and exit status."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{stage.name}.log"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    cmd = [sys.executable, "-m", stage.module, *stage.args]
    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            rc, capped = proc.wait(timeout=stage.wall_limit_s), False
        except subprocess.TimeoutExpired:
            proc.terminate()
            rc, capped = proc.wait(), True
    seconds = round(time.monotonic() - start, 1)
    return dict(stage=stage.name, rc=rc, seconds=seconds, wall_capped=capped, log=str(log_path))


_DEV_SCORE = re.compile(r"dev_score = ([0-9.]+)")


def best_dev_score(log: Path) -> float:
    """The best ``dev_score`` a stanza trainer logged (0 if none)."""
    if not log.exists():
        return 0.0
    return max((float(m) for m in _DEV_SCORE.findall(log.read_text())), default=0.0)


def promote(stage: Stage, log_dir: Path) -> bool:
    """Replace the stage's base model by its candidate if the candidate's dev is better."""
    assert stage.promote is not None
    candidate, model, base = (Path(p) for p in stage.promote)
    new = best_dev_score(log_dir / f"{stage.name}.log")
    old = best_dev_score(log_dir / f"{base}.log")
    if candidate.exists() and new > old:
        os.replace(candidate, model)
        return True
    return False


def train(
    ewt_dir: Path, out_dir: Path, work_dir: Path, cache_dir: Path, only: list[str] | None = None
) -> list[dict[str, object]]:
    """Train the requested stages (default all) and record their wall times."""
    for split in ("train", "dev"):
        if not Path(_ewt(ewt_dir, split)).exists():
            raise FileNotFoundError(f"UD English-EWT {split} file not found under {ewt_dir}")
    names = list(only or STAGE_ORDER)
    unknown = sorted(set(names) - set(STAGE_ORDER))
    if unknown:
        raise ValueError(f"unknown stage(s) {unknown}; choose from {list(STAGE_ORDER)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    pretrain = ensure_pretrain(cache_dir)
    if "tokenize" in names:
        prepare_tokenizer_data(ewt_dir, work_dir)
    plan = stages(ewt_dir, work_dir, out_dir, pretrain)
    log_dir = work_dir / "logs"
    lock = threading.Lock()

    def run_lane(lane: list[str]) -> list[dict[str, object]]:
        done = []
        for name in lane:
            result = run_stage(plan[name], log_dir)
            done.append(result)
            with lock:
                print(json.dumps(result), flush=True)
                with open(log_dir / "times.jsonl", "a") as f:
                    f.write(json.dumps(result) + "\n")
            if result["rc"] not in (0, None) and not result["wall_capped"]:
                raise RuntimeError(
                    f"stage {name} failed (exit {result['rc']}); see {result['log']}"
                )
            if plan[name].promote:
                result["promoted"] = promote(plan[name], log_dir)
        return done

    lanes = [[n for n in lane if n in names] for lane in LANES]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(run_lane, lane) for lane in lanes if lane]
        return [r for fut in futures for r in fut.result()]
