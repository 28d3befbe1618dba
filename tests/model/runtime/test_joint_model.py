"""The joint model: encoders by name, image projection, checkpoints."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from groundsearch.model.runtime.checkpoints import CheckpointError, load_joint, save_joint
from groundsearch.model.runtime.encoders.registry import ENCODERS as SPECS
from groundsearch.model.runtime.encoders.registry import (
    OPTIONS,
    CharMFOptions,
    PaperOptions,
    TreeRNNOptions,
    option_names,
)
from groundsearch.model.runtime.joint import ENCODERS, JointConfig, JointModel, build_inventory
from tests.paper_trees import bikes_ride, students, toy_vocab


def trees():
    return [students(), bikes_ride()]


def make(encoder: str) -> JointModel:
    vocab = toy_vocab(dim=8)
    # char-gru-mf embeds sentences as its 2 × rnn_hidden bi-GRU states
    rnn_hidden = 3 if encoder == "char-gru-mf" else 7
    # flat options: each encoder takes its own (rnn_hidden, relation_min_count or neither)
    config = JointConfig.from_dict(
        {
            "encoder": encoder,
            "hidden": 6,
            "rnn_hidden": rnn_hidden,
            "image_dim": 10,
            "relation_min_count": 1,
        }
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


def test_an_image_layer_beside_w_i_starts_as_w_i_learns_and_round_trips(tmp_path):
    """``image_hidden``: v = W_I z + W_O relu(W_H z), W_O zero at first (v = W_I z)."""
    plain = make("sdt-rnn")
    config = dataclasses.replace(plain.config, image_hidden=5)
    model = JointModel(config, plain.vocab, plain.inventory, "parser-A", "cnn-A")
    z = np.random.default_rng(0).normal(size=(3, 10))
    assert model.image_mlp is not None
    torch.testing.assert_close(
        model.encode_images(z), torch.as_tensor(z, dtype=torch.float32) @ model.W_I.T
    )
    model.encode_images(z).pow(2).sum().backward()
    assert model.image_mlp[2].weight.grad is not None and model.image_mlp[2].weight.grad.any()
    with torch.no_grad():
        model.image_mlp[2].weight.add_(0.5)
    save_joint(model, tmp_path / "m.pt")
    back = load_joint(tmp_path / "m.pt")
    assert back.config.image_hidden == 5
    torch.testing.assert_close(back.encode_images(z), model.encode_images(z))
    assert not torch.allclose(back.encode_images(z), plain.encode_images(z))


def test_half_checkpoint_stores_float16_and_8_bit_snapshots_and_loads_as_float32(tmp_path):
    model = make("sdt-rnn")
    model.snapshots = [{k: v.clone() for k, v in model.state_dict().items()} for _ in "ab"]
    save_joint(model, tmp_path / "half.pt", half=True)
    raw = torch.load(tmp_path / "half.pt", weights_only=False)
    assert {v.dtype for v in raw["state_dict"].values()} == {torch.float16}
    assert raw["vocab"]["vectors"] is None  # once, as the encoder's word table
    packed = raw["snapshots"][0]
    assert packed["encoder.W"]["int8"].dtype == torch.int8  # matrices: 8-bit rows
    assert packed["encoder.W"]["scale"].dtype == torch.float16
    back = load_joint(tmp_path / "half.pt")
    assert all(p.dtype == torch.float32 for p in back.parameters())
    assert len(back.snapshots) == 2
    for name, value in model.state_dict().items():  # within half a step of each row's scale
        step = value.abs().amax(dim=-1, keepdim=True) / 127 if value.dim() > 1 else 1e-2
        assert ((back.snapshots[0][name] - value).abs() <= step / 2 + 1e-3).all(), name
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


#: A config as checkpoints stored it before each encoder owned its options: one flat dict
#: of every encoder's options (the shipped SDT-RNN's has these keys).
OLD_FLAT = {
    "encoder": "sdt-rnn",
    "hidden": 6,
    "rnn_hidden": 512,
    "image_dim": 10,
    "freeze_words": False,
    "relation_min_count": 1,
    "max_child_order": 0,
    "unweighted": True,
    "nonlinearity": "relu",
    "char_cell": "gru",
    "char_pooling": "attention",
    "sqrt_features": True,
    "init_noise": 0.05,
    "seed": 3,
}


def test_an_old_flat_config_is_read_into_the_encoders_options(tmp_path):
    config = JointConfig.from_dict(OLD_FLAT)
    assert (config.encoder, config.hidden, config.image_dim) == ("sdt-rnn", 6, 10)
    assert (config.sqrt_features, config.seed) == (True, 3)
    assert config.options == TreeRNNOptions(
        freeze_words=False,
        init_noise=0.05,
        relation_min_count=1,
        unweighted=True,
        nonlinearity="relu",
    )
    # a checkpoint holding the old dict loads, and embeds as the model it was saved from
    model = JointModel(config, toy_vocab(dim=8), build_inventory(config, trees()), "p", "c")
    save_joint(model, tmp_path / "m.pt")
    state = torch.load(tmp_path / "m.pt", weights_only=False)
    state["config"] = dict(OLD_FLAT)
    torch.save(state, tmp_path / "old.pt")
    back = load_joint(tmp_path / "old.pt")
    assert back.config == config
    assert torch.equal(back.encode_sentences(trees()), model.encode_sentences(trees()))
    features = np.random.default_rng(0).normal(size=(2, 10))
    assert torch.equal(back.encode_images(features), model.encode_images(features))


def test_an_old_flat_config_of_another_family_keeps_only_its_options():
    config = JointConfig.from_dict(
        {**OLD_FLAT, "encoder": "char-gru-mf", "rnn_hidden": 3, "char_pooling": "max"}
    )
    assert config.options == CharMFOptions(rnn_hidden=3, char_pooling="max")
    assert config.to_dict() == {
        "encoder": "char-gru-mf",
        "hidden": 6,
        "image_dim": 10,
        "sqrt_features": True,
        "image_hidden": 0,  # the paper's W_I alone: an old config had no such field
        "seed": 3,
        "rnn_hidden": 3,
        "char_cell": "gru",
        "char_pooling": "max",
    }


@pytest.mark.parametrize("encoder", ENCODERS)
def test_a_config_is_stored_flat_with_its_encoders_options_only(encoder):
    config = JointConfig(encoder=encoder)
    assert type(config.options) is SPECS[encoder].options  # the encoder's defaults
    stored = config.to_dict()
    assert "options" not in stored
    shared = {"encoder", "hidden", "image_dim", "sqrt_features", "image_hidden", "seed"}
    assert set(stored) - shared == {f.name for f in dataclasses.fields(config.options)}
    assert JointConfig.from_dict(stored) == config


def test_option_names_are_one_namespace_apart_from_the_shared_fields():
    shared = {f.name for f in dataclasses.fields(JointConfig)}
    assert not option_names() & shared
    defaults: dict[str, object] = {}
    for cls in OPTIONS:  # a name two families share has one default (one flag)
        for f in dataclasses.fields(cls):
            assert defaults.setdefault(f.name, f.default) == f.default


def test_bad_configs_are_named(tmp_path):
    with pytest.raises(ValueError, match="bow takes PaperOptions, not TreeRNNOptions"):
        JointConfig(encoder="bow", options=TreeRNNOptions())
    with pytest.raises(ValueError, match="sdt-rnn takes TreeRNNOptions, not PaperOptions"):
        JointConfig(options=PaperOptions())
    with pytest.raises(ValueError, match=r"image_hidden must be 0 .* got -3"):
        JointConfig(image_hidden=-3)
    with pytest.raises(ValueError, match=r"unknown joint-model options \['layers'\]"):
        JointConfig.from_dict({"encoder": "bow", "layers": 2})
    save_joint(make("bow"), tmp_path / "m.pt")
    state = torch.load(tmp_path / "m.pt", weights_only=False)
    state["config"]["layers"] = 2
    torch.save(state, tmp_path / "bad.pt")
    with pytest.raises(CheckpointError, match="bad model config: unknown joint-model options"):
        load_joint(tmp_path / "bad.pt")
