"""SDT-RNN relation matrices ranked by Frobenius norm, and ``groundsearch relations``."""

from __future__ import annotations

import math

import pytest
import torch

from groundsearch.cli import main
from groundsearch.model.runtime.checkpoints import save_joint
from groundsearch.model.runtime.encoders.registry import TreeRNNOptions
from groundsearch.model.runtime.encoders.tree_batch import OTHER, RelationInventory
from groundsearch.model.runtime.joint import JointConfig, JointModel, build_inventory
from groundsearch.model.training.analysis import format_ranking, relation_norms
from tests.paper_trees import bikes_ride, students, toy_vocab

NAMES = (OTHER, "nsubj", "obj", "obl", "obl:at")
SCALES = {OTHER: 1.0, "nsubj": 3.0, "obj": 0.5, "obl": 2.0, "obl:at": 2.0}
HIDDEN = 4


def sdt_model() -> JointModel:
    """A 4-dim SDT-RNN whose matrix for a relation is ``SCALES[name] · I``."""
    config = JointConfig(encoder="sdt-rnn", hidden=HIDDEN, image_dim=5)
    model = JointModel(config, toy_vocab(dim=3), RelationInventory(NAMES), "p", "b")
    with torch.no_grad():
        for i, name in enumerate(NAMES):
            model.encoder.W[i] = SCALES[name] * torch.eye(HIDDEN)
    return model


def test_relations_are_ranked_by_frobenius_norm():
    ranking = relation_norms(sdt_model())
    assert [name for name, _ in ranking] == ["nsubj", "obl", "obl:at", OTHER, "obj"]
    for name, norm in ranking:  # ‖c·I‖_F = c·sqrt(n)
        assert norm == pytest.approx(SCALES[name] * math.sqrt(HIDDEN))


def test_each_norm_belongs_to_the_matrix_the_encoder_uses_for_that_relation():
    model = sdt_model()
    inv = model.inventory
    norms = dict(relation_norms(model))
    for relation in ("nsubj", "obl:at", "obl:beneath", "acl:relcl"):
        used = model.encoder.W[inv.index(relation)].detach()
        assert norms[inv.names[inv.index(relation)]] == pytest.approx(
            torch.linalg.norm(used).item()
        )
    # a rare subtype falls back to its base label, anything unknown to <other>
    assert inv.names[inv.index("obl:beneath")] == "obl"
    assert inv.names[inv.index("acl:relcl")] == OTHER


def test_built_inventory_lines_up_with_the_matrices():
    options = TreeRNNOptions(relation_min_count=1)
    config = JointConfig(encoder="sdt-rnn", hidden=HIDDEN, image_dim=5, options=options)
    trees = [students(), bikes_ride()]
    model = JointModel(config, toy_vocab(dim=3), build_inventory(config, trees), "p", "b")
    ranking = relation_norms(model)
    assert sorted(n for n, _ in ranking) == sorted(model.inventory.names)
    assert len(ranking) == model.encoder.W.shape[0]


@pytest.mark.parametrize("encoder", ["dt-rnn", "bow", "tree-lstm"])
def test_other_encoders_are_refused(encoder):
    config = JointConfig.from_dict(
        {"encoder": encoder, "hidden": HIDDEN, "rnn_hidden": 5, "image_dim": 5}
    )
    model = JointModel(config, toy_vocab(dim=3), build_inventory(config, [students()]), "p", "b")
    with pytest.raises(ValueError, match=f"only an sdt-rnn model .* this is {encoder}"):
        relation_norms(model)


def test_markdown_table_escapes_names():
    table = format_ranking([(OTHER, 2.0), ("a|b", 1.0)], markdown=True).splitlines()
    assert table[0] == "| rank | relation | ‖W‖_F |"
    assert table[2] == "| 1 | `<other>` | 2.000 |"
    assert table[3] == "| 2 | `a\\|b` | 1.000 |"


def test_cli_relations(tmp_path, capsys):
    save_joint(sdt_model(), tmp_path / "m.pt")
    assert main(["relations", str(tmp_path / "m.pt"), "--top", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# 5 relation matrices") and "identity: 2.000" in lines[0]
    assert lines[2].split() == ["1", "nsubj", "6.000"]
    assert lines[3].split() == ["2", "obl", "4.000"]
    assert len(lines) == 4
    assert main(["relations", str(tmp_path / "m.pt"), "--markdown"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2] == "| 1 | `nsubj` | 6.000 |" and len(table) == 2 + len(NAMES)


def test_cli_relations_errors_are_named(tmp_path, capsys):
    config = JointConfig(encoder="bow", hidden=HIDDEN, image_dim=5)
    save_joint(JointModel(config, toy_vocab(dim=3), None, "p", "b"), tmp_path / "bow.pt")
    assert main(["relations", str(tmp_path / "bow.pt")]) == 2
    err = capsys.readouterr().err
    assert "groundsearch relations: error:" in err and "this is bow" in err
    assert main(["relations", str(tmp_path / "none.pt")]) == 2
    assert "checkpoint not found" in capsys.readouterr().err
