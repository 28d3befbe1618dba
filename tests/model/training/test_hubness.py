"""Choosing the hubness correction: the bank's draw and the grid on the dev splits."""

from __future__ import annotations

import numpy as np

from groundsearch.model.training.hubness import DevSplit, bank_rows, choose


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_the_bank_draws_each_collection_in_proportion_and_never_twice():
    rows = bank_rows([30_000, 16_645], 10_000)
    assert [len(r) for r in rows] == [6432, 3568]  # 64 % / 36 %
    assert all(
        len(np.unique(r)) == len(r) and r.max() < n
        for r, n in zip(rows, [30_000, 16_645], strict=True)
    )
    assert [len(r) for r in bank_rows([5, 7], 100)] == [5, 7]  # fewer than the bank: all
    assert [r.tolist() for r in bank_rows([50], 10)] == [r.tolist() for r in bank_rows([50], 10)]


def hubbed(rng: np.random.Generator, name: str, n: int = 60, d: int = 16) -> DevSplit:
    """Photos with a caption each that leans towards one shared direction; photo 0 is
    that direction: a hub."""
    shared = unit(rng.normal(size=d))
    photos = unit(rng.normal(size=(n, d)))
    captions = unit(photos + 0.9 * shared + 0.5 * rng.normal(size=(n, d)) / np.sqrt(d))
    photos[0] = shared
    return DevSplit(name, photos, captions, np.arange(n))


def test_the_grid_corrects_a_split_with_a_hub_and_reports_the_raw_figures():
    rng = np.random.default_rng(0)
    splits = [hubbed(rng, "a"), hubbed(rng, "b")]
    bank = np.concatenate([s.captions for s in splits])
    chosen = choose(splits, bank, ks=(5, 20), weights=(0.0, 0.5, 1.0))
    assert chosen["weight"] > 0 and chosen["k"] in (5, 20)
    assert chosen["best"]["mean"] > chosen["raw"]["mean"]
    assert chosen["raw"]["weight"] == 0.0 and len(chosen["grid"]) == 6
    assert chosen["best"]["mean"] == (chosen["best"]["a"] + chosen["best"]["b"]) / 2


def test_the_captions_side_is_chosen_by_description():
    rng = np.random.default_rng(1)
    splits = [hubbed(rng, "a"), hubbed(rng, "b")]
    # a caption hub: every photo leans towards caption 0
    for s in splits:
        s.photos[1:] = unit(s.photos[1:] + 0.9 * s.captions[0])
    photos = np.concatenate([s.photos for s in splits])
    chosen = choose(splits, photos, "captions", ks=(5, 20), weights=(0.0, 0.5, 1.0))
    assert chosen["weight"] > 0 and chosen["best"]["mean"] > chosen["raw"]["mean"]
