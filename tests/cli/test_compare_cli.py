"""``groundsearch compare``: two checkpoints on one split, their paired difference."""

from __future__ import annotations

import json

from tests.tiny_data import make_tiny_flickr


def test_a_model_against_itself_differs_by_nothing(cli, tmp_path):
    root = make_tiny_flickr(tmp_path / "six", train=0, dev=0, test=6)
    shipped = "model/artifacts/sdt-rnn.pt"
    res = cli("compare", shipped, shipped, "--data", str(root), "--resamples", "20")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert (got["images"], got["captions"]) == (6, 30)
    assert got["first"]["rsum"] == got["second"]["rsum"] and got["first"]["encoder"] == "sdt-rnn"
    diff = got["second_minus_first"]
    assert diff["rsum"] == {"difference": 0.0, "ci95": [0.0, 0.0]} and diff["resamples"] == 20
    assert set(diff["i2t"]) == {"R@1", "R@5", "R@10", "R@20", "R@50", "mean_rank"}


def test_bad_inputs_are_named(cli, tmp_path):
    root = make_tiny_flickr(tmp_path / "two", train=0, dev=0, test=2)
    res = cli(
        "compare", "model/artifacts/sdt-rnn.pt", str(tmp_path / "none.pt"), "--data", str(root)
    )
    assert res.returncode == 2 and "none.pt" in res.stderr and "Traceback" not in res.stderr
    res = cli("compare", "a.pt", "b.pt", "--resamples", "0")
    assert res.returncode == 2 and "must be at least 1" in res.stderr
