"""``train --hold-out --concepts``, ``evaluate --concepts`` and ``evaluate-concepts``
end to end on a tiny Flickr8k-layout copy."""

from __future__ import annotations

import json

import pytest

from groundsearch.model.runtime.checkpoints import load_joint
from tests.tiny_data import make_tiny_flickr


@pytest.fixture(scope="module")
def held_out(cli, tmp_path_factory):
    tiny = make_tiny_flickr(tmp_path_factory.mktemp("tiny"))
    out = tmp_path_factory.mktemp("runs") / "m.pt"
    res = cli(
        "train", "--data", str(tiny), "--out", str(out), "--epochs", "1", "--batch-size", "10",
        "--normalize", "--hold-out", "dog", "--concepts", "0.4",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return tiny, out


def test_training_leaves_the_concept_out_and_records_the_channel(held_out):
    _tiny, out = held_out
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["held_out"]["dog"][0] == "dog"
    assert 0 < summary["train_images"] < 12  # the tiny train split has dog photos
    extra = load_joint(out).extra
    assert extra["concepts"]["weight"] == pytest.approx(0.4)
    assert "dog" not in extra["word_counts"] and extra["word_counts"]["a"] > 0


def test_evaluate_concepts_reports_queries_and_the_sample(cli, held_out, tmp_path):
    tiny, out = held_out
    res = cli(
        "evaluate-concepts", str(out), "--data", str(tiny), "--hold-out", "dog",
        "--sample", "--out", str(tmp_path / "c.json"),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "c.json").read_text())
    assert result["concept_weight"] == pytest.approx(0.4)
    assert [q["query"] for q in result["single"]["queries"]] == ["a dog"]
    assert 0 <= result["single"]["p@5"] <= 100
    assert result["sample"]["judged"] == 15 and len(result["sample"]["photos"]) == 15
    off = cli("evaluate-concepts", str(out), "--data", str(tiny), "--hold-out", "dog",
              "--concepts", "0")  # fmt: skip
    assert off.returncode == 0, off.stderr
    assert json.loads(off.stdout)["concept_weight"] == 0


def test_evaluate_takes_the_weight(cli, held_out):
    tiny, out = held_out
    res = cli("evaluate", str(out), "--data", str(tiny), "--no-sentence-benchmarks",
              "--concepts", "0")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["concept_weight"] == 0


def test_bad_concept_options_are_named(cli, held_out):
    tiny, out = held_out
    res = cli("evaluate-concepts", str(out), "--data", str(tiny), "--hold-out", "c@t")
    assert res.returncode == 2 and "one word" in res.stderr
    res = cli("evaluate-concepts", str(out), "--data", str(tiny), "--concepts", "11")
    assert res.returncode == 2 and "between 0 and 10" in res.stderr
    res = cli("train", "--data", str(tiny), "--out", "x.pt", "--hold-out", ",")
    assert res.returncode == 2 and "at least one concept" in res.stderr
