"""VectorStore against numpy brute force; removal, persistence, crash safety, errors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import groundsearch.index.store as store_mod
from groundsearch.index import IdentityMismatch, StoreError, UnknownItemError, VectorStore

DIM = 16
IDENTITY = {"checkpoint": "ab" * 32, "encoder": "sdt-rnn"}


def vectors(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def metas(n: int, start: int = 0) -> list[dict]:
    return [{"file": f"img{start + i}.jpg", "captions": [f"cap {start + i}"]} for i in range(n)]


def filled(kind: str, n: int = 60, seed: int = 0) -> tuple[VectorStore, np.ndarray]:
    store = VectorStore(DIM, kind, IDENTITY)
    x = vectors(n, seed)
    assert store.add(x, metas(n)) == list(range(n))
    return store, x


def brute_force(x: np.ndarray, q: np.ndarray, k: int, ids: list[int]) -> list[list[int]]:
    scores = q @ x.T
    return [[ids[j] for j in np.argsort(-row, kind="stable")[:k]] for row in scores]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flat_search_equals_brute_force(seed):
    store, x = filled("flat", seed=seed)
    q = vectors(7, seed + 100)
    results = store.search(q, 10)
    assert [[i for i, _, _ in hits] for hits in results] == brute_force(x, q, 10, store.ids)
    for row, hits in zip(q, results, strict=True):
        for i, score, meta in hits:
            assert score == pytest.approx(float(x[i] @ row), abs=1e-4)
            assert meta == {"file": f"img{i}.jpg", "captions": [f"cap {i}"]}


def test_hnsw_search_is_near_exact():
    store, x = filled("hnsw")
    q = vectors(7, 100)
    got = [[i for i, _, _ in hits] for hits in store.search(q, 5)]
    want = brute_force(x, q, 5, store.ids)
    recall = np.mean([len(set(g) & set(w)) / 5 for g, w in zip(got, want, strict=True)])
    assert recall >= 0.9


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_k_clipped_and_empty_store(kind):
    empty = VectorStore(DIM, kind, IDENTITY)
    assert len(empty) == 0
    assert empty.search(vectors(3), 5) == [[], [], []]
    store, _ = filled(kind, n=4)
    results = store.search(vectors(2, 9), 50)
    assert [len(hits) for hits in results] == [4, 4]
    scores = [s for _, s, _ in results[0]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_add_remove_search_round_trip(kind):
    store, x = filled(kind, n=30)
    removed = [0, 5, 17, 29]
    for i in removed:
        store.remove(i)
    assert len(store) == 26
    with pytest.raises(UnknownItemError):
        store.get(5)
    new_ids = store.add(vectors(3, 7), metas(3, start=30))
    assert new_ids == [30, 31, 32]  # never reused
    assert len(store) == 29
    results = store.search(np.concatenate([x[removed], vectors(5, 8)]), 29)
    for hits in results:
        ids = [i for i, _, _ in hits]
        assert len(ids) == 29 and not set(ids) & set(removed)
    if kind == "flat":
        live = [i for i in range(30) if i not in removed]
        allx = np.concatenate([x[live], vectors(3, 7)])
        q = vectors(4, 11)
        got = [[i for i, _, _ in h] for h in store.search(q, 8)]
        assert got == brute_force(allx, q, 8, store.ids)
    # removing everything leaves an empty but usable store
    for i in store.ids:
        store.remove(i)
    assert len(store) == 0
    assert store.search(vectors(2), 3) == [[], []]
    assert store.add(vectors(1), metas(1)) == [33]


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_save_load_round_trip(kind, tmp_path):
    store, _ = filled(kind)
    store.remove(3)
    store.remove(40)
    q = vectors(9, 50)
    before = store.search(q, 12)
    folder = tmp_path / "gallery"
    store.save(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["index.faiss", "meta.json"]
    loaded = VectorStore.load(folder, IDENTITY)
    assert (loaded.dim, loaded.kind, loaded.identity) == (DIM, kind, IDENTITY)
    assert len(loaded) == len(store) and loaded.ids == store.ids
    assert loaded.search(q, 12) == before
    assert loaded.get(7) == store.get(7)
    assert loaded.add(vectors(1, 3), metas(1, 60)) == [60]
    # saving over an existing store replaces it and leaves nothing beside it
    loaded.save(folder)
    assert len(VectorStore.load(folder)) == len(store) + 1
    assert [p.name for p in tmp_path.iterdir()] == ["gallery"]


def test_identity_mismatch_refused(tmp_path):
    store, _ = filled("flat", n=5)
    store.save(tmp_path / "g")
    other = {"checkpoint": "cd" * 32, "encoder": "sdt-rnn"}
    with pytest.raises(IdentityMismatch) as err:
        VectorStore.load(tmp_path / "g", other)
    assert "ab" * 32 in str(err.value) and "cd" * 32 in str(err.value)
    assert len(VectorStore.load(tmp_path / "g")) == 5  # no identity: accepted


def test_crash_before_swap_keeps_old_store(tmp_path, monkeypatch):
    folder = tmp_path / "g"
    old, _ = filled("flat", n=10)
    old.save(folder)
    q = vectors(3, 5)
    expected = VectorStore.load(folder).search(q, 4)
    new, _ = filled("flat", n=20, seed=1)

    def crash(tmp: Path, target: Path) -> None:
        raise OSError("simulated crash during swap")

    monkeypatch.setattr(store_mod, "_swap", crash)
    with pytest.raises(OSError, match="simulated"):
        new.save(folder)
    loaded = VectorStore.load(folder, IDENTITY)
    assert len(loaded) == 10 and loaded.search(q, 4) == expected


def test_crash_between_renames_falls_back_to_old(tmp_path, monkeypatch):
    folder = tmp_path / "g"
    old, _ = filled("hnsw", n=10)
    old.save(folder)
    q = vectors(3, 5)
    expected = old.search(q, 4)
    new, _ = filled("hnsw", n=20, seed=1)
    real_rename = os.rename
    calls = []

    def rename(src, dst):
        calls.append(src)
        if len(calls) == 2:  # old renamed away; die before the new one is renamed in
            raise OSError("simulated crash mid-swap")
        real_rename(src, dst)

    monkeypatch.setattr(store_mod.os, "rename", rename)
    with pytest.raises(OSError, match="mid-swap"):
        new.save(folder)
    monkeypatch.undo()
    assert not folder.exists()
    loaded = VectorStore.load(folder, IDENTITY)
    assert len(loaded) == 10 and loaded.search(q, 4) == expected
    # the next save completes and clears the leftovers
    new.save(folder)
    assert len(VectorStore.load(folder)) == 20
    assert [p.name for p in tmp_path.iterdir()] == ["g"]


def test_load_tolerates_leftover_temp_folder(tmp_path):
    folder = tmp_path / "g"
    store, _ = filled("flat", n=6)
    store.save(folder)
    junk = tmp_path / ".g.tmp-deadbeef"
    junk.mkdir()
    (junk / "index.faiss").write_bytes(b"half written")
    assert len(VectorStore.load(folder)) == 6
    store.save(folder)
    assert not junk.exists()


def test_missing_or_corrupt_folder(tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        VectorStore.load(tmp_path / "nowhere")
    folder = tmp_path / "g"
    store, _ = filled("flat", n=6)
    store.save(folder)
    (folder / "meta.json").write_text("{not json")
    with pytest.raises(StoreError, match=r"corrupt meta\.json"):
        VectorStore.load(folder)
    store.save(folder)
    (folder / "index.faiss").write_bytes(b"garbage")
    with pytest.raises(StoreError, match=r"unreadable index\.faiss"):
        VectorStore.load(folder)
    store.save(folder)
    doc = json.loads((folder / "meta.json").read_text())
    doc["items"] = doc["items"][:-1]
    (folder / "meta.json").write_text(json.dumps(doc))
    with pytest.raises(StoreError, match="does not match"):
        VectorStore.load(folder)
    (folder / "index.faiss").unlink()
    with pytest.raises(StoreError, match=r"index\.faiss missing"):
        VectorStore.load(folder)


def test_bad_inputs():
    store, _ = filled("flat", n=5)
    with pytest.raises(ValueError, match=r"\(n, 16\), got \(3, 8\)"):
        store.add(np.zeros((3, 8), np.float32), metas(3))
    with pytest.raises(ValueError, match=r"\(n, 16\), got \(16,\)"):
        store.search(np.zeros(DIM, np.float32), 3)
    with pytest.raises(ValueError, match="2 vectors but 1"):
        store.add(vectors(2), metas(1))
    bad = vectors(3)
    bad[1, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        store.add(bad, metas(3))
    with pytest.raises(ValueError, match="NaN"):
        store.search(bad, 2)
    with pytest.raises(ValueError, match="JSON"):
        store.add(vectors(1), [{"file": object()}])
    with pytest.raises(ValueError, match="k must be"):
        store.search(vectors(1), 0)
    assert len(store) == 5  # failed adds changed nothing
    with pytest.raises(UnknownItemError, match="no item with id 99"):
        store.remove(99)
    store.remove(2)
    with pytest.raises(KeyError):  # UnknownItemError is a KeyError
        store.remove(2)
    with pytest.raises(ValueError, match="kind"):
        VectorStore(DIM, "ivf", IDENTITY)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_vector_returns_what_was_added(kind):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    store = VectorStore(8, kind, {"m": 1})
    ids = store.add(x, [{"i": i} for i in range(5)])
    np.testing.assert_allclose(store.vector(ids[3]), x[3])
    store.remove(ids[3])
    with pytest.raises(UnknownItemError):
        store.vector(ids[3])
