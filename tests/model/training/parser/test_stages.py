"""The parser-training stages on a tiny slice of UD English-EWT (42 train and 12 dev
sentences, multi-word tokens among them): the tokenizer's data, the trainers' command
lines, the refusals, promotion by dev score, and one real stage (lemma) end to end."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from groundsearch.common.settings import get_settings
from groundsearch.model.runtime.parsing.parser import MODEL_FILES
from groundsearch.model.runtime.parsing.pretrain import PRETRAIN_NAME, ensure_pretrain
from groundsearch.model.training.parser.compact import compact_models, write_manifest
from groundsearch.model.training.parser.stages import (
    LANES,
    SEED,
    STAGE_ORDER,
    Stage,
    best_dev_score,
    prepare_tokenizer_data,
    promote,
    stages,
    train,
)


def sentences(conllu: Path) -> list[str]:
    return [b for b in conllu.read_text(encoding="utf-8").split("\n\n") if b.strip()]


def is_mwt(line: str) -> bool:
    """A multi-word token's line (``19-20	don't	…``)."""
    first = line.split("\t", 1)[0]
    return "-" in first and first.replace("-", "").isdigit()


def multi_word_tokens(blocks: list[str]) -> Counter[tuple[str, tuple[str, ...]]]:
    """Each multi-word token with the words it stands for (lower case, as the tokenizer
    keeps them), and how often it occurs."""
    found: Counter[tuple[str, tuple[str, ...]]] = Counter()
    for block in blocks:
        rows = [line.split("\t") for line in block.splitlines() if line[:1].isdigit()]
        for i, row in enumerate(rows):
            if "-" in row[0]:
                first, last = (int(x) for x in row[0].split("-"))
                found[
                    (row[1], tuple(r[1].lower() for r in rows[i + 1 : i + 2 + last - first]))
                ] += 1
    return found


@pytest.fixture(scope="module")
def ewt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first sentences of EWT train and dev, and two more of each holding a
    multi-word token (``don't``), in EWT's file names."""
    source = get_settings().ewt_dir
    out = tmp_path_factory.mktemp("ewt")
    for split, n in (("train", 40), ("dev", 10)):
        name = f"en_ewt-ud-{split}.conllu"
        blocks = sentences(source / name)
        mwt = [b for b in blocks[n:] if any(is_mwt(line) for line in b.splitlines())][:2]
        (out / name).write_text("\n\n".join(blocks[:n] + mwt) + "\n\n", encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def prepared(ewt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("work")
    prepare_tokenizer_data(ewt, work)
    return work


@pytest.mark.parametrize("split", ["train", "dev"])
def test_tokenizer_data_holds_the_slices_text_sentences_and_mwts(ewt, prepared, split):
    blocks = sentences(ewt / f"en_ewt-ud-{split}.conllu")
    data = prepared / "data"
    text = (data / f"{split}.txt").read_text(encoding="utf-8")
    said = [line[len("# text = ") :] for b in blocks for line in b.splitlines()
            if line.startswith("# text = ")]  # fmt: skip
    assert len(said) == len(blocks)
    assert text.split() == " ".join(said).split()  # the raw text, sentence after sentence
    labels = (data / f"{split}.toklabels").read_text()
    assert set(labels) <= set("01234\n")
    # a sentence ends at a 2 (a token) or a 4 (a multi-word token); a 3 ends an MWT
    assert labels.count("2") + labels.count("4") == len(blocks)
    mwts = multi_word_tokens(blocks)
    assert labels.count("3") + labels.count("4") == sum(mwts.values()) >= 2
    found = json.loads((data / f"{split}-mwt.json").read_text())
    assert {(form, tuple(words)): n for (form, words), n in found} == mwts


def test_every_stage_reads_the_prepared_files_and_saves_its_model(ewt, prepared, tmp_path):
    out, pretrain = tmp_path / "models", tmp_path / PRETRAIN_NAME
    plan = stages(ewt, prepared, out, pretrain)
    assert sorted(plan) == sorted(STAGE_ORDER)
    assert sorted(n for lane in LANES for n in lane) == sorted(STAGE_ORDER)
    for name, stage in plan.items():
        args = dict(zip(stage.args, stage.args[1:], strict=False))  # flag → its value
        assert args["--mode"] == "train" and args["--seed"] == str(SEED)
        for flag in ("--train_file", "--eval_file", "--txt_file", "--label_file",
                     "--mwt_json_file", "--dev_txt_file", "--dev_label_file"):  # fmt: skip
            if flag in args:
                assert Path(args[flag]).is_file(), (name, flag)
        if stage.promote is None:  # a base stage saves where the parser loads it from
            assert Path(args["--save_dir"]) == out
            assert args["--save_name"] == MODEL_FILES[name]
        else:  # an annealing stage starts from its base model, later in the same lane
            candidate, model, base = stage.promote
            assert Path(model) == out / MODEL_FILES[base]
            start = args.get("--init_from") or args["--continue_from"]
            assert start == model and Path(args["--save_dir"]) / args["--save_name"] == Path(
                candidate
            )
            lane = next(lane for lane in LANES if name in lane)
            assert lane.index(base) < lane.index(name)
        if "--wordvec_pretrain_file" in args:
            assert args["--wordvec_pretrain_file"] == str(pretrain)


def test_training_refuses_a_missing_treebank_and_unknown_stages(ewt, tmp_path):
    with pytest.raises(FileNotFoundError, match="UD English-EWT train file not found"):
        train(tmp_path, tmp_path / "out", tmp_path / "work", tmp_path)
    with pytest.raises(ValueError, match=r"unknown stage\(s\) \['parse'\]"):
        train(ewt, tmp_path / "out", tmp_path / "work", tmp_path, ["lemma", "parse"])
    assert not (tmp_path / "out").exists()  # refused before anything was made


def test_an_annealed_model_replaces_its_base_only_if_dev_improves(tmp_path):
    logs, candidate, model = tmp_path / "logs", tmp_path / "pos.anneal.pt", tmp_path / "pos.pt"
    logs.mkdir()
    stage = Stage("pos-anneal", "m", (), 60, promote=(str(candidate), str(model), "pos"))
    (logs / "pos.log").write_text("step 200: dev_score = 0.9012\nstep 400: dev_score = 0.9301\n")
    (logs / "pos-anneal.log").write_text("step 200: dev_score = 0.9288\n")
    candidate.write_bytes(b"annealed")
    model.write_bytes(b"base")
    assert best_dev_score(logs / "pos.log") == pytest.approx(0.9301)
    assert best_dev_score(logs / "missing.log") == 0.0
    assert not promote(stage, logs) and model.read_bytes() == b"base"
    (logs / "pos-anneal.log").write_text("step 400: dev_score = 0.9350\n")
    assert promote(stage, logs) and model.read_bytes() == b"annealed"
    assert not candidate.exists()


@pytest.mark.slow  # stanza's trainer runs in a subprocess (about 20 s)
def test_the_lemma_stage_trains_compacts_and_is_recorded(ewt, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / PRETRAIN_NAME).symlink_to(ensure_pretrain(get_settings().cache_dir))
    out, work = tmp_path / "models", tmp_path / "work"
    [result] = train(ewt, out, work, cache, ["lemma"])
    assert result["stage"] == "lemma" and result["rc"] == 0 and not result["wall_capped"]
    log = Path(str(result["log"]))
    assert 0.5 < best_dev_score(log) <= 1.0  # lemma F1 on the 12 dev sentences
    assert json.loads((work / "logs" / "times.jsonl").read_text()) == result
    assert [p.name for p in out.iterdir()] == [MODEL_FILES["lemma"]]
    ((before, after),) = compact_models(out).values()
    assert after < before
    weights = torch.load(out / MODEL_FILES["lemma"], map_location="cpu", weights_only=True)
    floats = [
        t
        for t in weights["model"].values()
        if isinstance(t, torch.Tensor) and t.is_floating_point()
    ]
    assert floats and all(t.dtype == torch.float16 for t in floats)
    manifest = json.loads(write_manifest(out, work / "logs" / "times.jsonl").read_text())
    assert list(manifest["files"]) == ["lemma"]
    assert manifest["train_seconds"] == {"lemma": result["seconds"]}
