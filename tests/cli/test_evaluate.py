"""``groundsearch train --encoder kcca`` and the full ``evaluate`` protocol, end to end
on a tiny Flickr8k-layout copy with a data dir of its own."""

from __future__ import annotations

import json

import pytest

from tests.tiny_data import DATA, make_tiny_flickr


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data dir holding a tiny flickr8k/ (with expert judgments) and 8 STS-B test
    pairs, but no SICK."""
    root = tmp_path_factory.mktemp("data")
    make_tiny_flickr(root / "flickr8k", expert=True)
    (root / "stsbenchmark").mkdir()
    sts = (DATA / "stsbenchmark" / "sts-test.csv").read_text().splitlines()[:8]
    (root / "stsbenchmark" / "sts-test.csv").write_text("\n".join(sts) + "\n")
    return root


@pytest.fixture(scope="module")
def kcca(cli, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "kcca.pt"
    res = cli(
        "train", "--encoder", "kcca", "--out", str(out), "--landmarks", "30",
        env_extra={"GROUNDSEARCH_DATA_DIR": str(data_dir)},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return out, res


def test_kcca_train_writes_checkpoint_and_summary(kcca):
    out, res = kcca
    printed = json.loads(res.stdout)
    summary = json.loads(out.with_suffix(".json").read_text())
    assert printed["encoder"] == summary["encoder"] == "kcca"
    assert summary["kcca"]["n_landmarks"] == 30 and summary["backbone"] == "efficientnet-lite0"
    assert {"reg", "dim"} <= set(summary["selected"])
    assert summary["dev"]["rsum"] == max(g["dev_rsum"] for g in summary["grid"])
    assert summary["train_seconds"] >= 0 and out.exists()


def test_evaluate_kcca_runs_the_whole_protocol(cli, kcca, data_dir):
    res = cli("evaluate", str(kcca[0]), env_extra={"GROUNDSEARCH_DATA_DIR": str(data_dir)})
    assert res.returncode == 0, res.stderr
    m = json.loads(res.stdout)
    assert m["encoder"] == "kcca" and (m["images"], m["captions"]) == (4, 20)
    assert 0 <= m["rsum"] <= 600 and 1 <= m["sentence_similarity_mean_rank"] <= 16
    n_judged = len((data_dir / "flickr8k" / "ExpertAnnotations.txt").read_text().splitlines())
    assert m["expert_spearman"]["pairs"] == n_judged
    assert -100 <= m["expert_spearman"]["spearman"] <= 100
    assert m["sts_b"]["pairs"] == 8 and -100 <= m["sts_b"]["pearson"] <= 100
    assert "SICK.txt not found" in m["sick_r"]["skipped"]


def test_evaluate_any_flickr_layout_folder(cli, kcca, tmp_path):
    """Three photos, no expert file, no sentence benchmarks: still evaluated."""
    root = make_tiny_flickr(tmp_path / "three", train=0, dev=0, test=3)
    res = cli("evaluate", str(kcca[0]), "--data", str(root), "--no-sentence-benchmarks")
    assert res.returncode == 0, res.stderr
    m = json.loads(res.stdout)
    assert (m["images"], m["captions"]) == (3, 15)
    assert "no ExpertAnnotations.txt" in m["expert_spearman"]["skipped"]
    assert "sts_b" not in m and "sick_r" not in m


def test_evaluate_bad_inputs_are_named(cli, kcca, tmp_path):
    root = make_tiny_flickr(tmp_path / "bad", train=0, dev=0, test=2)
    (tmp_path / "empty.txt").write_text("")
    res = cli("evaluate", str(kcca[0]), "--data", str(root), "--split", str(tmp_path / "empty.txt"))
    assert res.returncode == 2 and "no image with captions found" in res.stderr
    (root / "ExpertAnnotations.txt").write_text("a.jpg\tb.jpg#0\t1\t2\n")
    res = cli("evaluate", str(kcca[0]), "--data", str(root), "--no-sentence-benchmarks")
    assert res.returncode == 2 and "ExpertAnnotations.txt:1: expected" in res.stderr
    assert "Traceback" not in res.stderr


def test_the_shipped_model_evaluates_by_default_and_names_a_caption_it_cannot_read(cli, tmp_path):
    root = make_tiny_flickr(tmp_path / "two", train=0, dev=0, test=2)
    res = cli("evaluate", "--data", str(root), "--no-sentence-benchmarks")
    assert res.returncode == 0, res.stderr
    m = json.loads(res.stdout)
    assert m["encoder"] == "sdt-rnn" and m["checkpoint"].endswith("sdt-rnn.pt")
    assert 0 <= m["rsum"] <= 600
    captions = root / "Flickr8k.token.txt"
    first = captions.read_text().splitlines()[0].split("\t")[0]
    captions.write_text(captions.read_text() + f"{first[:-1]}9\tXyzzyq plughh frobozzic\n")
    res = cli("evaluate", "--data", str(root), "--no-sentence-benchmarks")
    assert res.returncode == 2, res.stdout
    assert "('Xyzzyq plughh frobozzic') has no word the model knows" in res.stderr
    assert "Traceback" not in res.stderr
