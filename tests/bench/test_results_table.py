"""bench/results_table.py: rows, order, wider metrics and intervals (old results read
with dashes), verb groups, rebuilt train commands, published rows."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.bench import load_script


@pytest.fixture(scope="module")
def table() -> ModuleType:
    return load_script("results_table")


def _side(r1: float, med: float) -> dict[str, float]:
    return {"R@1": r1, "R@5": 30.0, "R@10": 40.0, "median_rank": med, "mean_rank": 50.0}


GRU = {
    "encoder": "gru",
    "backbone": "efficientnet-lite2-10crop",
    "half": False,
    "joint": {
        "encoder": "gru",
        "hidden": 1024,
        "rnn_hidden": 512,
        "image_dim": 1408,
        "freeze_words": False,
        "relation_min_count": 5,
        "sqrt_features": True,
        "init_noise": 0.05,
        "seed": 0,
    },
    "train": {
        "epochs": 15,
        "batch_size": 128,
        "margin": 0.2,
        "hardest": False,
        "warmup": 0,
        "normalize": True,
        "optimizer": "adam-cyclic",
        "lr": 0.002,
        "weight_decay": 0.0,
        "adagrad_reset": 5,
        "cycles": 5,
        "ensemble": True,
        "seed": 0,
    },
    "dev": {},
    "train_seconds": 1234.0,
}
GRU_TEST = {
    "checkpoint": "x/gru.pt",
    "encoder": "gru",
    "split": "test",
    "i2t": _side(20.04, 6.0),
    "t2i": _side(14.0, 8.5),
    "rsum": 174.0,
    "sentence_similarity_mean_rank": 12.34,
    "expert_spearman": {"spearman": 60.0, "pairs": 10},
    "sts_b": {"skipped": "no file"},
    "sick_r": {"pearson": 70.0, "spearman": 65.0, "pairs": 10},
}
KCCA = {
    "encoder": "kcca",
    "kcca": {"n_landmarks": 500, "dims": [50, 100, 200, 400], "regs": [0.01, 0.1, 1.0], "seed": 3},
    "backbone": "efficientnet-lite2",
    "dev": {},
    "train_seconds": 60.0,
}


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    for name, data in {"gru": GRU, "gru.test": GRU_TEST, "kcca": KCCA}.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    return tmp_path


def _rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| model")
    ]


def test_rows_in_encoder_order_then_published(table: ModuleType, runs: Path) -> None:
    rows = _rows(table.render(runs))
    assert [r[0] for r in rows[:3]] == [
        "kcca",
        "gru",
        "*SDT-RNN, AlexNet features, as reported by Karpathy et al. 2014* (published)",
    ]
    kcca, gru = rows[0], rows[1]
    assert kcca[1:3] == ["not evaluated", "–"] and kcca[14] == "1.0"
    assert gru[1:5] == ["20.0", "30.0", "40.0", "6"] and gru[8] == "8.5"
    assert gru[9:] == ["174.0", "12.3", "60.0", "–", "70.0", "20.6"]


def test_train_commands(table: ModuleType, runs: Path) -> None:
    gru = table.train_command(GRU, runs / "gru.pt")
    assert gru == (
        f"groundsearch train --out {runs / 'gru.pt'} --encoder gru --hidden 1024 "
        "--rnn-hidden 512 --relation-min-count 5 --sqrt-features --tune-words --epochs 15 "
        "--batch-size 128 --margin 0.2 --warmup 0 --normalize --optimizer adam-cyclic "
        "--lr 0.002 --weight-decay 0.0 --cycles 5 --ensemble --backbone efficientnet-lite2 "
        "--ten-crop --seed 0  # no flag sets joint.init_noise=0.05"
    )
    kcca = table.train_command(KCCA, runs / "kcca.pt")
    assert kcca == (
        f"groundsearch train --out {runs / 'kcca.pt'} --encoder kcca --landmarks 500 "
        "--backbone efficientnet-lite2 --seed 3  # unknown: model.half"
    )
    old = {**GRU, "train": {k: v for k, v in GRU["train"].items() if k != "ensemble"}}
    assert table.train_command(old, runs / "gru.pt").endswith(
        "# unknown: train.ensemble; no flag sets joint.init_noise=0.05"
    )
    assert f"`{kcca}`" in table.render(runs)


def test_published_rsum(table: ModuleType) -> None:
    rows = {r[0]: r for r in table.published_rows()}
    rsum = {label: r[9] for label, r in rows.items()}
    assert rsum["*SDT-RNN, AlexNet features, as reported by Karpathy et al. 2014* (published)"] == (
        "104.7"
    )
    # GUIDE §3 states 124.6 for the RCNN variant, but its six figures sum to 122.6
    assert rsum["*SDT-RNN on RCNN object detections (Karpathy et al. 2014)* (published)"] == (
        "122.6"
    )
    kiros = rows["*Kiros et al. 2014, LSTM, VGG features* (published)"]
    assert rsum[kiros[0]] == "214.9" and (kiros[4], kiros[8]) == ("8", "10")
    assert rsum["*Karpathy & Fei-Fei 2015, BRNN* (published)"] == "199.9"
    assert all(len(r) == len(table.HEADER) for r in table.published_rows())


def test_wider_metrics_and_groups_of_a_new_result(table: ModuleType, runs: Path) -> None:
    new = {
        **GRU_TEST,
        "i2t": {**_side(20.0, 6.0), "R@20": 70.04, "R@50": 85.0, "mean_rank": 31.26},
        "t2i": {**_side(14.0, 8.5), "R@20": 66.0, "R@50": 80.0},
        "ci95": {
            "i2t": {"R@10": [61.0, 67.04]},
            "t2i": {"R@10": [54.0, 58.5]},
            "rsum": [240.04, 262.5],
        },
        "t2i_groups": {
            "with_verb": {"captions": 3000, "R@1": 17.0, "R@5": 42.0, "R@10": 57.0,
                          "median_rank": 8.0},
            "without_verb": {"captions": 2000},
        },
    }  # fmt: skip
    (runs / "gru.test.json").write_text(json.dumps(new))
    wide = table.wide_row("gru", new)
    assert wide == ["gru", "70.0", "85.0", "6", "31.3", "66.0", "80.0", "8.5", "50.0",
                    "61.0–67.0", "54.0–58.5", "240.0–262.5"]  # fmt: skip
    groups = table.group_row("gru", new)
    assert groups == ["gru", "3000", "17.0", "42.0", "57.0", "8", "2000", "–", "–", "–", "–"]
    text = table.render(runs)
    assert "| gru | 70.0 | 85.0 |" in text and "| gru | 3000 | 17.0 |" in text


def test_old_results_read_with_dashes(table: ModuleType, runs: Path) -> None:
    wide = table.wide_row("gru", GRU_TEST)
    assert wide[1:3] == ["–", "–"] and wide[3:5] == ["6", "50.0"] and wide[9:] == ["–"] * 3
    assert table.group_row("gru", GRU_TEST)[1:] == ["–"] * 10
    assert table.wide_row("kcca", None)[1:] == ["–"] * 11
    assert len(table.WIDE_HEADER) == 12 and len(table.GROUP_HEADER) == 11


def test_paper_options_appear_only_when_set(table: ModuleType, runs: Path) -> None:
    # options added with issue 15: absent from older summaries, printed only when not
    # the default, so older runs' commands stay as they were
    joint = {**GRU["joint"], "encoder": "dt-rnn", "unweighted": True, "nonlinearity": "relu"}
    train = {**GRU["train"], "loss": "squared", "lr_min": 1e-6, "ensemble_best": 0}
    cmd = table.train_command({**GRU, "joint": joint, "train": train}, runs / "d.pt")
    assert "--unweighted --nonlinearity relu" in cmd and "--loss squared" in cmd
    assert "--lr 0.002 --lr-min 1e-06" in cmd and "--ensemble-best" not in cmd
    plain = {**GRU["joint"], "unweighted": False, "nonlinearity": "tanh"}
    cmd = table.train_command({**GRU, "joint": plain}, runs / "g.pt")
    assert "--unweighted" not in cmd and "--nonlinearity" not in cmd


def test_a_summary_with_only_its_encoders_options(table: ModuleType, runs: Path) -> None:
    # summaries since each encoder owns its options hold the shared fields and its own
    from groundsearch.model.runtime.encoders.registry import WordRNNOptions
    from groundsearch.model.runtime.joint import JointConfig

    joint = JointConfig(
        encoder="gru", hidden=1024, image_dim=1408, sqrt_features=True,
        options=WordRNNOptions(freeze_words=False),
    ).to_dict()  # fmt: skip
    cmd = table.train_command({**GRU, "joint": joint}, runs / "gru.pt")
    assert cmd == table.train_command(GRU, runs / "gru.pt").replace(
        " --relation-min-count 5", ""
    ).replace("  # no flag sets joint.init_noise=0.05", "")
