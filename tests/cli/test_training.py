"""``groundsearch train`` and ``evaluate`` end to end on a tiny Flickr8k-layout copy."""

from __future__ import annotations

import json

import numpy as np
import pytest

from groundsearch.common.settings import get_settings

FLICKR = get_settings().data_dir / "flickr8k"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """12 train, 4 dev and 4 test photos of Flickr8k with their captions."""
    root = tmp_path_factory.mktemp("tiny-flickr")
    (root / "Images").mkdir()
    lines = (FLICKR / "Flickr8k.token.txt").read_text().splitlines()
    splits = {}
    for split, n in (("train", 12), ("dev", 4), ("test", 4)):
        src = f"Flickr_8k.{split}Images.txt"
        names = (FLICKR / src).read_text().split()[:n]
        (root / src).write_text("\n".join(names) + "\n")
        splits[split] = names
    names = {n for v in splits.values() for n in v}
    for n in names:
        (root / "Images" / n).symlink_to(FLICKR / "Images" / n)
    kept = [ln for ln in lines if ln.split("#", 1)[0] in names]
    (root / "Flickr8k.token.txt").write_text("\n".join(kept) + "\n")
    return root


def test_train_then_evaluate(cli, tiny, tmp_path):
    out = cli(
        "train",
        "--data",
        str(tiny),
        "--out",
        str(tmp_path / "m.pt"),
        "--epochs",
        "2",
        "--batch-size",
        "10",
        "--normalize",
        "--margin",
        "0.2",
    )
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "m.pt").exists() and (tmp_path / "m.json").exists()
    # STS-B / SICK-R would parse 12k sentences into this test's fresh parse cache.
    res = cli("evaluate", str(tmp_path / "m.pt"), "--data", str(tiny), "--no-sentence-benchmarks")
    assert res.returncode == 0, res.stderr
    metrics = json.loads(res.stdout)
    assert metrics["images"] == 4 and metrics["captions"] == 20
    assert metrics["encoder"] == "sdt-rnn" and metrics["sentence_similarity_mean_rank"] >= 1
    assert 0 <= metrics["rsum"] <= 600 and metrics["t2i"]["mean_rank"] >= 1


def test_evaluate_errors_are_named(cli, tiny, tmp_path):
    res = cli("evaluate", str(tmp_path / "none.pt"), "--data", str(tiny))
    assert res.returncode == 2 and "checkpoint not found" in res.stderr
    res = cli("train", "--data", str(tiny), "--out", str(tmp_path / "x.pt"), "--encoder", "nope")
    assert res.returncode == 2 and "invalid choice: 'nope'" in res.stderr


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    """16 train and 6 dev cc-web photos as a features collection."""
    from tests.tiny_data import make_tiny_features

    return make_tiny_features(tmp_path_factory.mktemp("tiny-web"))


def test_two_collections_train_together(cli, tiny, web, tmp_path):
    out = tmp_path / "two.pt"
    res = cli(
        "train", "--source", str(tiny), "--source", f"{web}=2", "--out", str(out),
        "--epochs", "2", "--batch-size", "10", "--normalize", "--margin", "0.2",
        "--backbone", "efficientnet-lite2",  # the one cc-web's features come from
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "two.json").read_text())
    assert summary["sources"] == [tiny.name, f"{web.name}=2"]
    # selection reads each collection's dev and scores the mean of their rsums
    dev = summary["dev"]
    assert set(dev["sources"]) == {tiny.name, web.name}
    assert dev["rsum"] == pytest.approx(
        (dev["sources"][tiny.name]["rsum"] + dev["sources"][web.name]["rsum"]) / 2
    )
    res = cli("evaluate", str(out), "--source", str(web), "--split", "dev",
              "--no-sentence-benchmarks")  # fmt: skip
    assert res.returncode == 0, res.stderr
    metrics = json.loads(res.stdout)
    assert (metrics["images"], metrics["captions"]) == (6, 6)
    assert metrics["expert_spearman"]["skipped"]


def test_a_collection_without_photos_or_split_is_refused(cli, web, tmp_path):
    res = cli("train", "--source", f"{web}=much", "--out", str(tmp_path / "x.pt"))
    assert res.returncode == 2 and "not a number" in res.stderr
    res = cli("train", "--source", str(tmp_path / "nothing"), "--out", str(tmp_path / "x.pt"))
    assert res.returncode == 2 and "source not found" in res.stderr
    res = cli("features", "--source", str(web))
    assert res.returncode == 2 and "as features already" in res.stderr


def test_fine_tuning_on_ones_own_photos_changes_its_answers(cli, tmp_path):
    """A model trained on a few Flickr8k photos, fine-tuned (--init) on a captions file of
    other photos: its retrieval on those photos rises and it learns their new words."""
    from tests.tiny_data import make_tiny_flickr

    base_data = make_tiny_flickr(tmp_path / "base", train=12, dev=4, test=0)
    base = tmp_path / "base.pt"
    common = ["--normalize", "--margin", "0.2", "--batch-size", "10", "--seed", "1"]
    ensemble = ["--optimizer", "adam-cyclic", "--cycles", "2", "--ensemble"]
    res = cli("train", "--data", str(base_data), "--out", str(base), "--epochs", "2", *ensemble,
              *common)  # fmt: skip
    assert res.returncode == 0, res.stderr
    own = make_tiny_flickr(tmp_path / "own", train=60, dev=0, test=0)
    lines = [  # "a …": every caption holds a word the base model knows, to be scored by it
        ln.split("#", 1)[0] + "\ta photo : " + ln.split("\t", 1)[1]
        for ln in (own / "Flickr8k.token.txt").read_text().splitlines()
        if ln.endswith(".jpg", 0, ln.index("#"))
    ]
    (own / "mine.tsv").write_text("\n".join(f"Images/{ln}" for ln in lines) + "\n")
    tuned = tmp_path / "tuned.pt"
    res = cli(
        "train", "--init", str(base), "--source", str(own / "mine.tsv"), "--out", str(tuned),
        "--epochs", "8", "--lr", "0.01", "--mix", "0", *common,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "tuned.json").read_text())["init"] == str(base)

    def rsum(checkpoint):
        res = cli("evaluate", str(checkpoint), "--source", str(own / "mine.tsv"), "--split",
                  "train", "--no-sentence-benchmarks")  # fmt: skip
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)["rsum"]

    assert rsum(tuned) > rsum(base) + 20
    import torch

    states = [torch.load(p, weights_only=False) for p in (base, tuned)]
    words = [set(state["vocab"]["words"]) for state in states]
    assert words[0] < words[1]
    # each member of the base's snapshot ensemble was fine-tuned: the ensemble survives
    assert len(states[0]["snapshots"]) == len(states[1]["snapshots"]) == 2


def test_a_student_is_taught_by_saved_models(cli, tiny, tmp_path, parser):
    """--teacher: saved models' ensemble scores the training captions as ``evaluate --with``
    does; the student trains with it and records it."""
    from groundsearch.model.data import load_captioned_images
    from groundsearch.model.runtime.checkpoints import load_checkpoint
    from groundsearch.model.runtime.images.features import FeatureExtractor
    from groundsearch.model.training.teacher import teach

    common = ["--data", str(tiny), "--epochs", "1", "--batch-size", "10", "--normalize"]
    teachers = [tmp_path / "t1.pt", tmp_path / "t2.pt"]
    for path, encoder in zip(teachers, ("bow", "sdt-rnn"), strict=True):
        res = cli("train", "--out", str(path), "--encoder", encoder, *common)
        assert res.returncode == 0, res.stderr
    ds = load_captioned_images(tiny, split="train")
    extractor = FeatureExtractor(cache_dir=get_settings().cache_dir)
    trees, feats = (
        parser.parse(ds.captions[:6]),
        extractor.embed_files([ds.image_path(i) for i in range(3)]),
    )
    teacher = teach(teachers, trees, feats, parser.version, extractor.identity)
    models = [load_checkpoint(p, parser=parser.version) for p in teachers]
    mean = sum(m.embed_images(feats) @ m.embed_sentences(trees).T for m in models) / 2
    got = teacher.scores(np.arange(3), np.arange(6)).numpy()
    assert np.allclose(got, mean, atol=2e-3)  # float16 rows

    student = tmp_path / "student.pt"
    res = cli("train", "--out", str(student), *common, "--teacher", str(teachers[0]),
              "--teacher", str(teachers[1]), "--distill", "0.5")  # fmt: skip
    assert res.returncode == 0, res.stderr
    summary = json.loads(student.with_suffix(".json").read_text())
    assert summary["teachers"] == [str(t) for t in teachers]
    assert summary["train"]["distill"] == 0.5
    res = cli("train", "--out", str(student), *common, "--distill", "0.5")
    assert res.returncode == 2 and "--teacher and --distill" in res.stderr
    res = cli("train", "--out", str(student), *common, "--teacher", str(tmp_path / "none.pt"),
              "--distill", "0.5")  # fmt: skip
    assert res.returncode == 2 and "teacher checkpoint not found" in res.stderr
