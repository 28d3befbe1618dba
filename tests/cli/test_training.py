"""``groundsearch train`` and ``evaluate`` end to end on a tiny Flickr8k-layout copy."""

from __future__ import annotations

import json

import pytest

from groundsearch.settings import get_settings

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
