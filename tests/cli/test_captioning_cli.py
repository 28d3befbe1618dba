"""``groundsearch train-decoder`` and ``evaluate-captions`` end to end on a tiny
Flickr8k-layout copy whose gallery holds made-up vectors under the shipped model's
identity; and their errors for a gallery of another model or with photos missing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from groundsearch.common.settings import get_settings
from groundsearch.index.gallery import Gallery
from groundsearch.index.ingest.indexing_runs import IndexedFile, IndexedFiles
from groundsearch.model.runtime.checkpoints import checkpoint_identity
from tests.tiny_data import make_tiny_flickr, shipped_width


def gallery_of(root, folder, identity, skip: int = 0) -> None:
    """Every photo of ``root`` but the first ``skip`` with its captions, random vectors."""
    rng = np.random.default_rng(0)
    lines = (root / "Flickr8k.token.txt").read_text().splitlines()
    captions: dict[str, list[str]] = {}
    for line in lines:
        key, text = line.split("\t")
        captions.setdefault(key.split("#")[0], []).append(text)
    files = []
    for i, name in enumerate(sorted(captions)[skip:]):
        texts = tuple(captions[name])
        vectors = rng.normal(size=(len(texts), shipped_width())).astype(np.float32)
        v = rng.normal(size=shipped_width()).astype(np.float32)
        files.append(IndexedFile(str(root / "Images" / name), 1, 1, f"sha{i}", v, texts, vectors))
    g = Gallery.create(folder, shipped_width(), identity)
    IndexedFiles(g).add_files(files)
    g.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    make_tiny_flickr(root / "flickr8k", train=8, dev=3, test=3)
    return root


def test_a_decoder_is_trained_from_a_gallery_and_scored(cli, data, tmp_path):
    identity = checkpoint_identity(get_settings().default_checkpoint)
    gallery_of(data / "flickr8k", tmp_path / "g", identity)
    env = {"GROUNDSEARCH_DATA_DIR": str(data)}
    out = tmp_path / "decoder.pt"
    small = ["--hidden", "16", "--cond", "8", "--min-count", "1", "--batch-size", "8"]
    res = cli("train-decoder", "--gallery", str(tmp_path / "g"), "--out", str(out),
              "--epochs", "2", "--threads", "1", *small, env_extra=env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert out.is_file() and "epoch 1" in res.stdout
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["command"].startswith("groundsearch train-decoder --gallery")
    res = cli("evaluate-captions", "--gallery", str(tmp_path / "g"), "--decoder", str(out),
              "--threads", "1", "--json", str(tmp_path / "e.json"), env_extra=env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "BLEU-4" in res.stdout and "retrieval R@1" in res.stdout
    scores = json.loads((tmp_path / "e.json").read_text())
    assert scores["photos"] == 3 and len(scores["sentences"]) == 3


def test_a_gallery_of_another_model_or_without_the_photos_is_refused(cli, data, tmp_path):
    env = {"GROUNDSEARCH_DATA_DIR": str(data)}
    gallery_of(data / "flickr8k", tmp_path / "other", {"checkpoint_sha256": "another"})
    res = cli("train-decoder", "--gallery", str(tmp_path / "other"), "--out",
              str(tmp_path / "d.pt"), env_extra=env)  # fmt: skip
    assert res.returncode == 2 and "was built by" in res.stderr
    identity = checkpoint_identity(get_settings().default_checkpoint)
    gallery_of(data / "flickr8k", tmp_path / "part", identity, skip=2)
    res = cli("train-decoder", "--gallery", str(tmp_path / "part"), "--out",
              str(tmp_path / "d.pt"), env_extra=env)  # fmt: skip
    assert res.returncode == 2 and "photos are not in the gallery" in res.stderr
    assert not (tmp_path / "d.pt").exists()


def test_without_a_gallery_the_cached_features_give_the_vectors_and_concepts_are_held_out(
    cli, data, tmp_path
):
    env = {"GROUNDSEARCH_DATA_DIR": str(data)}
    out = tmp_path / "heldout.pt"
    small = ["--hidden", "16", "--cond", "8", "--min-count", "1", "--batch-size", "8"]
    res = cli("train-decoder", "--source", "cc-web", "--out", str(out), "--epochs", "1",
              "--threads", "1", *small, env_extra=env)  # fmt: skip
    assert res.returncode == 2 and "source not found" in res.stderr  # no cc-web folder here
    # by default, the collections the data folder holds (Flickr8k alone here); the captions'
    # vectors come from their parses: a caption-conditioned share needs no gallery
    res = cli("train-decoder", "--out", str(out), "--epochs", "1", "--threads", "1", *small,
              "--select", "cider", env_extra=env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    whole = json.loads(out.with_suffix(".json").read_text())
    judged = whole["summary"]
    assert judged["judged"] == judged["history"][0]["judged"] >= 0  # dev CIDEr-D, epoch 1
    # on from that decoder, on half of the training photos: epoch 0 is the decoder as it was
    on = tmp_path / "on.pt"
    res = cli("train-decoder", "--init", str(out), "--source", "flickr8k=0.5", "--out", str(on),
              "--epochs", "1", "--threads", "1", "--batch-size", "8", "--select", "cider",
              "--no-dev-scores", env_extra=env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    went_on = json.loads(on.with_suffix(".json").read_text())
    assert went_on["init"] == str(out) and went_on["summary"]["history"][0]["epoch"] == 0
    assert 0 < went_on["train_captions"] < whole["train_captions"]
    assert went_on["summary"]["arch"]["hidden"] == 16  # the decoder's own architecture
    res = cli("train-decoder", "--out", str(out), "--select", "bleu", env_extra=env)
    assert res.returncode == 2 and "select must be one of loss, cider" in res.stderr
    res = cli("train-decoder", "--source", "flickr8k", "--out", str(out), "--epochs", "1",
              "--threads", "1", *small, "--sentence-share", "0", "--hold-out", "default",
              env_extra=env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["hold_out"] == ["cat", "horse", "cow", "bird", "guitar", "bicycle", "boat",
                                   "car", "motorcycle", "snow"]  # fmt: skip
    scored = tmp_path / "e.json"
    res = cli("evaluate-captions", "--decoder", str(out), "--threads", "1", "--novel",
              "--hold-out", "default", "--json", str(scored), env_extra=env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "held-out mention F1" in res.stdout and "novel words: threshold 0.15" in res.stdout
    scores = json.loads(scored.read_text())
    assert set(scores["held_out"]["mention"]["concepts"]) == set(summary["hold_out"])
    assert scores["photos"] == 3 and scores["novel"]["count"] == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["evaluate-captions", "--novel", "--tagger-threshold", "0"], "--tagger-threshold: must"),
        (["evaluate-captions", "--novel", "--novel-threshold", "nan"], "--novel-threshold: must"),
        (["train-tagger", "--out", "t.npz", "--weight-decay", "-1"], "--weight-decay: must"),
        (["set-concepts", "--tagger", "1.5", "--out", "x.pt"], "tagger's share must be in [0, 1]"),
    ],
)
def test_bad_tagger_settings_are_refused_with_their_flag(argv, message, capsys, tmp_path):
    from groundsearch.cli import main

    argv = [str(tmp_path / a) if a.endswith((".npz", ".pt")) else a for a in argv]
    try:
        status = main(argv)  # a command's own check: a CLI error
    except SystemExit as exit_:  # argparse's check of the flag
        status = exit_.code
    assert status == 2 and message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing written


def test_set_concepts_names_the_refits_its_new_checkpoint_needs(capsys, tmp_path):
    """The relevance and the vector tagger are bound to the checkpoint they were fitted
    for: the copy's output names the commands that fit them for it."""
    from groundsearch.cli import main
    from groundsearch.common.settings import get_settings

    out = tmp_path / "rare.pt"
    assert main(["set-concepts", str(get_settings().default_checkpoint), "--rare", "2",
                 "--out", str(out)]) == 0  # fmt: skip
    captured = capsys.readouterr()
    done = json.loads(captured.out)
    assert done["concepts"]["rare"] == 2 and out.is_file()
    assert [c.split()[1] for c in done["refit"]] == ["train-tagger", "fit-relevance"]
    assert all(str(out) in c for c in done["refit"]) and "--on vectors" in done["refit"][0]
    assert "fitted for the old checkpoint" in captured.err
