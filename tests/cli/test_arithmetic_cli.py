"""``groundsearch evaluate-arithmetic`` end to end: the shipped SDT-RNN on 12 real
Flickr8k test photos, and every bad input named without a traceback."""

from __future__ import annotations

import json

import pytest

from tests.tiny_data import make_tiny_flickr


@pytest.fixture(scope="module")
def twelve(tmp_path_factory):
    return make_tiny_flickr(tmp_path_factory.mktemp("arith"), train=0, dev=0, test=12)


def test_scores_pairs_and_writes_the_json(cli, twelve, tmp_path):
    out = tmp_path / "arith.json"
    res = cli(
        "evaluate-arithmetic", "--data", str(twelve), "--pairs", "dog>man,beach>snow",
        "--k", "2", "--min-starts", "3", "--min-b-photos", "3", "--examples", "1",
        "--out", str(out),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "share of B in the top 2, mean of 1 pairs: arithmetic" in res.stdout
    got = json.loads(out.read_text())
    assert got["encoder"] == "sdt-rnn" and (got["photos"], got["captions"]) == (12, 60)
    dog, beach = got["pairs"]
    # dogs (not men) in 5 photos, men (or "men") in 4; one beach photo: skipped
    assert (dog["pair"], dog["starts"], dog["photos_with_b"]) == ("dog→man", 5, 4)
    assert "skipped" in beach and got["mean"]["pairs"] == 1
    for q in ("arithmetic", "text", "photo"):
        assert 0 <= dog[q]["share_b"] <= 100 and -100 <= dog[q]["likeness"] <= 100
    example = dog["examples"][0]
    assert example["start"].endswith(".jpg") and len(example["arithmetic"]) == 2
    assert example["start"] not in example["arithmetic"] + example["photo"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pairs", "dog"], "--pairs: bad pair 'dog': write A>B"),
        (["--pairs", "dog>dog"], "A and B are the same word"),
        (["--k", "0"], "must be at least 1"),
        (["--k", "12"], "k must be between 1 and 11"),
        (["--examples", "-1"], "invalid choice"),
        (["--out", "/nonexistent/a.json"], "not a file in an existing folder"),
        (["--pairs", "dog>qwxzv"], "no word the model knows"),
    ],
)
def test_bad_inputs_are_named(cli, twelve, args, message):
    res = cli("evaluate-arithmetic", "--data", str(twelve), *args)
    assert res.returncode == 2, res.stdout
    assert message in res.stderr and "Traceback" not in res.stderr
