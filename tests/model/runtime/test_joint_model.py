"""The joint model: encoders by name, image projection, checkpoints."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from groundsearch.model.runtime.checkpoints import CheckpointError, load_joint, save_joint
from groundsearch.model.runtime.joint import ENCODERS, JointConfig, JointModel, build_inventory
from tests.paper_trees import bikes_ride, students, toy_vocab


def trees():
    return [students(), bikes_ride()]


def make(encoder: str) -> JointModel:
    vocab = toy_vocab(dim=8)
    # char-gru-mf embeds sentences as its 2 × rnn_hidden bi-GRU states
    rnn_hidden = 3 if encoder == "char-gru-mf" else 7
    config = JointConfig(
        encoder=encoder, hidden=6, rnn_hidden=rnn_hidden, image_dim=10, relation_min_count=1
    )
    return JointModel(config, vocab, build_inventory(config, trees()), "parser-A", "cnn-A")


@pytest.mark.parametrize("encoder", ENCODERS)
def test_every_encoder_embeds_sentences_and_images(encoder):
    model = make(encoder)
    y = model.encode_sentences(trees())
    v = model.encode_images(np.ones((3, 10)))
    assert y.shape == (2, 6) and v.shape == (3, 6)
    (y.sum() + v.sum()).backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("encoder", ENCODERS)
def test_checkpoint_round_trips(encoder, tmp_path):
    model = make(encoder)
    with torch.no_grad():
        model.W_I.add_(1.0)
    save_joint(model, tmp_path / "m.pt", extra={"dev_rsum": 12.5})
    back = load_joint(tmp_path / "m.pt", parser="parser-A", backbone="cnn-A")
    torch.testing.assert_close(back.encode_sentences(trees()), model.encode_sentences(trees()))
    torch.testing.assert_close(
        back.encode_images(np.ones((1, 10))), model.encode_images(np.ones((1, 10)))
    )
    assert back.extra == {"dev_rsum": 12.5}
    assert back.vocab.words == model.vocab.words


def test_half_checkpoint_stores_float16_and_loads_as_float32(tmp_path):
    model = make("sdt-rnn")
    model.snapshots = [{k: v.clone() for k, v in model.state_dict().items()} for _ in "ab"]
    save_joint(model, tmp_path / "half.pt", half=True)
    raw = torch.load(tmp_path / "half.pt", weights_only=False)
    stored = [raw["state_dict"], *raw["snapshots"]]
    assert {v.dtype for state in stored for v in state.values()} == {torch.float16}
    back = load_joint(tmp_path / "half.pt")
    assert all(p.dtype == torch.float32 for p in back.parameters())
    assert len(back.snapshots) == 2
    torch.testing.assert_close(
        back.encode_sentences(trees()), model.encode_sentences(trees()), atol=1e-2, rtol=1e-2
    )


def test_checkpoint_from_another_parser_or_backbone_is_refused(tmp_path):
    save_joint(make("sdt-rnn"), tmp_path / "m.pt")
    with pytest.raises(CheckpointError, match="trained with parser parser-A, but this parser"):
        load_joint(tmp_path / "m.pt", parser="parser-B")
    with pytest.raises(CheckpointError, match="trained on cnn-A image features"):
        load_joint(tmp_path / "m.pt", backbone="cnn-B")


def test_bad_checkpoint_files_are_named(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_joint(tmp_path / "none.pt")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(CheckpointError, match="not a groundsearch checkpoint"):
        load_joint(tmp_path / "junk.pt")


def test_unknown_encoder_and_wrong_feature_size_are_named():
    with pytest.raises(ValueError, match="unknown encoder 'transformer'"):
        JointConfig(encoder="transformer")
    with pytest.raises(ValueError, match=r"N × 10"):
        make("bow").encode_images(np.ones((2, 7)))
