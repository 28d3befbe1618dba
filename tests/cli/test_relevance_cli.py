"""``fit-relevance`` and ``evaluate-relevance`` options (the commands themselves embed a
whole split: documented runs, not tests)."""

from __future__ import annotations

import json

import pytest

from groundsearch.cli import build_parser
from groundsearch.cli import relevance as cli
from groundsearch.model.training.relevance import CONCEPTS, FORMS_ONLY


def test_forms_only_asks_the_concepts_without_their_kinds():
    parser = build_parser()
    for command in ("fit-relevance", "evaluate-relevance"):
        assert cli._concepts(parser.parse_args([command])) == CONCEPTS
        assert cli._concepts(parser.parse_args([command, "--forms-only"])) == FORMS_ONLY


def test_a_nouns_table_that_is_not_there_is_refused_at_the_flag(tmp_path, capsys):
    parser = build_parser()
    table = tmp_path / "nouns.tsv"
    table.write_text("noun\tclasses\n", encoding="utf-8")
    assert parser.parse_args(["evaluate-relevance", "--nouns", str(table)]).nouns == str(table)
    assert parser.parse_args(["fit-relevance", "--nouns", "none"]).nouns == "none"
    with pytest.raises(SystemExit):
        parser.parse_args(["fit-relevance", "--nouns", str(tmp_path / "missing.tsv")])
    assert "no noun -> classes table" in capsys.readouterr().err


def test_fit_hubness_chooses_on_dev_and_writes_a_file_for_the_checkpoint(cli, tmp_path):
    from groundsearch.common.settings import get_settings
    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.hubness import load_hubness
    from tests.tiny_data import make_tiny_flickr

    root = make_tiny_flickr(tmp_path / "flickr", train=6, dev=4, test=0)
    out = tmp_path / "hubness.npz"
    done = cli("fit-hubness", "--source", str(root), "--bank", "20", "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["out"] == str(out)
    hub = load_hubness(out, checkpoint_identity(get_settings().default_checkpoint))
    assert hub.captions is not None
    assert len(hub.photos.bank) == 20 and len(hub.captions.bank) == 6  # all 6 train photos
    for side, name in ((hub.photos, "photos_penalty"), (hub.captions, "captions_penalty")):
        assert (side.k, side.weight) == (summary[name]["k"], summary[name]["weight"])
    assert set(summary["dev_description_corrected"]) >= {"mean"}
    held = cli(
        "fit-hubness", "--source", str(root), "--bank", "20", "--hold-out", "dog",
        "--out", str(tmp_path / "held.npz"),
    )  # fmt: skip
    assert held.returncode == 0, held.stderr
    kept = load_hubness(tmp_path / "held.npz").captions
    assert kept is not None and len(kept.bank) < 6  # the dog photos left out of the banks
    missing = cli("fit-hubness", "--source", str(tmp_path / "nowhere"), "--out", str(out))
    assert missing.returncode != 0 and "Traceback" not in missing.stderr


@pytest.mark.parametrize("command", ["evaluate", "evaluate-concepts"])
def test_a_hubness_file_that_cannot_be_used_is_named(cli, tmp_path, command):
    bad = tmp_path / "hubness.npz"
    bad.write_bytes(b"not a hubness file")
    done = cli(command, "--hubness", str(bad), "--split", "test")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "cannot read hubness file" in done.stderr


def test_fit_fusion_chooses_on_dev_and_refuses_a_split_without_short_queries(cli, tmp_path):
    from groundsearch.common.settings import get_settings
    from groundsearch.model.runtime.checkpoints import checkpoint_identity
    from groundsearch.model.runtime.fusion import load_fusion
    from tests.tiny_data import make_tiny_flickr

    root = make_tiny_flickr(tmp_path / "flickr", train=0, dev=40, test=0)
    out = tmp_path / "fusion.json"
    done = cli("fit-fusion", "--source", str(root), "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    fusion = load_fusion(out, checkpoint_identity(get_settings().default_checkpoint))
    assert [list(w.values()) for w in summary["weights"]] == [list(w) for w in fusion.weights]
    assert fusion.weights and fusion.info["command"] == "groundsearch fit-fusion"
    (name,) = summary["fused"]  # the one source, by its name
    chosen = summary["fused"][name]["short"]["ap"]
    assert chosen >= summary["joint_alone"][name]["short"]["ap"]  # chosen on it
    few = make_tiny_flickr(tmp_path / "few", train=0, dev=2, test=0)
    refused = cli("fit-fusion", "--source", str(few), "--out", str(tmp_path / "none.json"))
    assert refused.returncode != 0 and "no short query" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "none.json").exists()
