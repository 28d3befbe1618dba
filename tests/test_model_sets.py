"""Taught model sets: installed atomically, served by the settings, restored; and the
fine-tuning recipe ``train --init`` and ``teach`` run by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundsearch.common import model_sets
from groundsearch.common.settings import Settings
from groundsearch.model.training.loop import FINE_TUNE, fine_tune_config
from groundsearch.service.core.settings import ServiceSettings


def _staged(taught: Path, name: str = ".staging-x") -> Path:
    staged = taught / name
    staged.mkdir(parents=True)
    (staged / model_sets.CHECKPOINT).write_bytes(b"weights")
    (staged / "relevance.json").write_text("{}")
    return staged


def test_a_set_installed_is_served_until_restored(tmp_path):
    taught = tmp_path / "taught"
    assert model_sets.current(taught) is None
    shipped = Settings(taught_dir=taught, model_dir=tmp_path / "shipped")
    assert shipped.default_checkpoint == tmp_path / "shipped" / model_sets.CHECKPOINT
    folder = model_sets.install(taught, _staged(taught), "shop")
    assert folder == taught / "shop" and not (taught / ".staging-x").exists()
    assert model_sets.current(taught) == folder
    s = ServiceSettings(taught_dir=taught, model_dir=tmp_path / "shipped")
    assert s.checkpoint_path == folder / model_sets.CHECKPOINT
    assert s.default_decoder == folder / "decoder.pt"
    assert s.companion(None, "hubness.npz") == folder / "hubness.npz"
    assert s.served_model == "taught: shop"
    named = ServiceSettings(taught_dir=taught, checkpoint=tmp_path / "other.pt")
    assert named.checkpoint_path == tmp_path / "other.pt"
    assert named.served_model == str(tmp_path / "other.pt")
    assert model_sets.restore(taught) and not model_sets.restore(taught)
    assert model_sets.current(taught) is None and folder.is_dir()  # the set stays
    assert ServiceSettings(taught_dir=taught).served_model == "shipped"


def test_names_and_broken_pointers_are_refused(tmp_path):
    taught = tmp_path / "taught"
    model_sets.install(taught, _staged(taught), "shop")
    for bad in ("", "../up", ".hidden", model_sets.CURRENT, "shop"):
        with pytest.raises(ValueError):
            model_sets.check_name(taught, bad)
    (taught / model_sets.CURRENT).write_text("../elsewhere\n")
    assert model_sets.current(taught) is None
    (taught / model_sets.CURRENT).write_text("gone\n")  # a set without its checkpoint
    assert model_sets.current(taught) is None


def test_the_fine_tuning_recipe_is_the_checkpoints_on_a_short_schedule():
    recipe = {"margin": 0.3, "hardest": True, "normalize": True, "lr": 0.002,
              "optimizer": "adam-cyclic", "epochs": 60, "cycles": 20, "distill": 1.0,
              "batch_size": 128, "unknown_field": 1}  # fmt: skip
    cfg = fine_tune_config(recipe, {})
    assert (cfg.margin, cfg.hardest, cfg.normalize, cfg.batch_size) == (0.3, True, True, 128)
    assert (cfg.epochs, cfg.cycles, cfg.distill) == (FINE_TUNE["epochs"], FINE_TUNE["cycles"], 0.0)
    assert cfg.lr == pytest.approx(0.0005)
    given = fine_tune_config(recipe, {"epochs": 2, "lr": 0.01, "margin": 0.2})
    assert (given.epochs, given.lr, given.margin, given.hardest) == (2, 0.01, 0.2, True)
