"""The FAISS index derived from a gallery's records: exact search, tombstones, snapshots."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.index.search.mapped_files import advise_random, mappings
from groundsearch.index.search.vectors import IndexSettings, VectorIndex


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.normal(size=(n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_flat_search_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    x, q = unit(rng, 300, 16), unit(rng, 5, 16)
    index = VectorIndex(16)
    index.add(range(1, 301), x)
    for row, hits in zip(q, index.search(q, 7), strict=True):
        expected = np.argsort(-(x @ row), kind="stable")[:7] + 1
        assert [i for i, _ in hits] == expected.tolist()
        assert np.allclose([s for _, s in hits], np.sort(x @ row)[::-1][:7], atol=1e-5)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_stored_vectors_are_read_from_memory_and_none_when_not_all_held(kind):
    rng = np.random.default_rng(3)
    x = unit(rng, 50, 16)
    index = VectorIndex(16, kind)
    index.add(range(1, 41), x[:40])
    index.add(range(41, 51), x[40:])  # a second add: main and delta alike
    got = index.stored([50, 3, 41, 1])
    assert got is not None and np.array_equal(got, x[[49, 2, 40, 0]])
    assert index.stored([3, 51]) is None  # never added
    index.remove([3])
    assert index.stored([3]) is None and index.stored([4]) is not None


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_products_with_weights_equal_the_stored_vectors_products(kind):
    """A few ids of a segment (products at scattered positions) and most of it (the whole
    segment multiplied, then its rows taken), across main and delta alike; None where
    ``stored`` is None."""
    rng = np.random.default_rng(4)
    x, w = unit(rng, 50, 16), rng.normal(size=(3, 16)).astype(np.float32)
    index = VectorIndex(16, kind)
    index.add(range(1, 41), x[:40])
    index.add(range(41, 51), x[40:])
    for ids in ([50, 3, 41, 1], [3, 7], list(range(40, 0, -1)), list(range(1, 51))):
        got = index.products(ids, w)
        assert got is not None and got.shape == (len(ids), 3)
        np.testing.assert_allclose(got, x[np.array(ids) - 1] @ w.T, rtol=1e-5, atol=1e-6)
    assert index.products([3, 51], w) is None  # never added
    index.remove([3])
    assert index.products([3], w) is None and index.products([4], w) is not None


def test_hnsw_search_is_near_exact():
    rng = np.random.default_rng(2)
    x, q = unit(rng, 2000, 32), unit(rng, 20, 32)
    index = VectorIndex(32, "hnsw")
    index.add(range(1, 2001), x)
    recall = np.mean(
        [
            len({i for i, _ in hits} & set((np.argsort(-(x @ row))[:10] + 1).tolist())) / 10
            for row, hits in zip(q, index.search(q, 10), strict=True)
        ]
    )
    assert recall > 0.9


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_removed_ids_never_come_back_and_k_is_clipped(kind):
    rng = np.random.default_rng(3)
    x = unit(rng, 50, 8)
    index = VectorIndex(8, kind)
    assert index.search(x[:1], 5) == [[]]
    index.add(range(1, 51), x)
    index.remove([5, 6, 7, 999])  # 999 was never added: ignored
    assert len(index) == 47 and index.tombstones == 3 and index.total == 50
    hits = index.search(x[4:7], 100)
    assert all(len(h) == 47 and not {5, 6, 7} & {i for i, _ in h} for h in hits)


def test_ids_must_increase_and_vectors_must_be_finite():
    index = VectorIndex(4)
    index.add([3, 4], np.eye(4, dtype=np.float32)[:2])
    with pytest.raises(ValueError, match="increase"):
        index.add([2], np.ones((1, 4)))
    with pytest.raises(ValueError, match="NaN"):
        index.add([9], np.full((1, 4), np.nan))
    with pytest.raises(ValueError, match="shape"):
        index.add([9], np.ones((1, 5)))
    with pytest.raises(ValueError, match="k must be"):
        index.search(np.ones(4), 0)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_snapshot_round_trip_and_header_check(kind, tmp_path):
    rng = np.random.default_rng(4)
    x = unit(rng, 40, 8)
    index = VectorIndex(8, kind)
    index.add(range(1, 41), x)
    index.remove([2])
    index.last_removal = 1
    header = {"identity": {"checkpoint_sha256": "a"}}
    index.save(tmp_path / "images", header)
    index.add([41], x[:1])
    index.save(tmp_path / "images", header)  # the first file is replaced, not kept
    assert len(list(tmp_path.glob("images-*.faiss"))) == 1
    loaded = VectorIndex.load(tmp_path / "images", header)
    assert loaded is not None and loaded.kind == kind
    assert (loaded.last_id, loaded.last_removal, len(loaded)) == (41, 1, 40)
    assert loaded.search(x[:3], 5) == index.search(x[:3], 5)
    assert VectorIndex.load(tmp_path / "images", {"identity": {"checkpoint_sha256": "b"}}) is None
    assert VectorIndex.load(tmp_path / "nothing", header) is None
    (tmp_path / "images.json").write_text("{not json")
    assert VectorIndex.load(tmp_path / "images", header) is None


def exact_top(x: np.ndarray, q: np.ndarray, k: int, ids: np.ndarray) -> list[set[int]]:
    return [set(ids[np.argsort(-(x @ row))[:k]].tolist()) for row in q]


def clustered(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    """Unit vectors around ``centres`` (real embeddings cluster; uniform noise does not)."""
    x = centres[rng.integers(0, len(centres), n)] + 0.35 * rng.normal(size=(n, centres.shape[1]))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def refine_codes_owned(index: VectorIndex) -> bool:
    """Whether the main's float16 re-rank codes were read into memory (not a view of
    their file; the lists' file is checked mapped below)."""
    return not isinstance(index._main.codes, np.memmap)


def test_ivfpq_is_near_exact_takes_additions_into_its_delta_and_maps_its_snapshot(tmp_path):
    rng = np.random.default_rng(5)
    centres = rng.normal(size=(50, 64))
    x, q = clustered(rng, centres, 4000), clustered(rng, centres, 30)
    ids = np.arange(1, 4001)
    chunks = [(ids[i : i + 1000].tolist(), x[i : i + 1000]) for i in range(0, 4000, 1000)]
    params = IndexSettings(m=16, nprobe=16, k_factor=8)
    index = VectorIndex.build(64, "ivfpq", 4000, x[:2000], chunks, tmp_path / "images", params)
    assert index.sealed and index.built and index.delta == 0
    assert index.describe().startswith("IVF64,PQ16,Refine(SQfp16)")
    assert len(list(tmp_path.glob("images-*.main.faiss"))) == 1  # written when sealed

    def recall(idx: VectorIndex, x: np.ndarray, ids: np.ndarray) -> float:
        found = [{i for i, _ in hits} for hits in idx.search(q, 10)]
        exact = exact_top(x, q, 10, ids)
        return float(np.mean([len(f & e) / 10 for f, e in zip(found, exact, strict=True)]))

    assert recall(index, x, ids) >= 0.9
    # additions go to the exact delta and are found at once; removals leave both parts
    extra = unit(rng, 5, 64)
    index.add(range(4001, 4006), extra)
    assert index.delta == 5 and index.search(extra[2], 1)[0][0][0] == 4003
    index.remove([4003, int(index.search(q[0], 1)[0][0][0])])
    assert 4003 not in {i for i, _ in index.search(extra[2], 50)[0]}
    header = {"identity": {"checkpoint_sha256": "a"}}
    index.save(tmp_path / "images", header)
    loaded = VectorIndex.load(tmp_path / "images", header)
    assert loaded is not None and loaded.sealed and loaded.delta == 5 and len(loaded) == 4003
    # the compressed main keeps no float32 copies: its vectors are the records' to give
    assert index.stored([1]) is None and index.stored([4001]) is not None
    assert loaded.search(q, 10) == index.search(q, 10)
    assert refine_codes_owned(index) is False  # mapped back when sealed: stays on disk
    assert refine_codes_owned(loaded) is False
    main = next(tmp_path.glob("images-*.main.faiss"))
    views = [n for _, n in mappings(main)]  # index and loaded: each maps the whole file
    assert len(views) == 2 and all(n >= main.stat().st_size for n in views)
    assert advise_random(main) == sum(views)  # read at random: no read-ahead
    loaded.add([4006], extra[:1])  # the mapped main takes nothing; the delta does
    assert loaded.delta == 6 and loaded.search(extra[0], 2)[0][0][0] in {4001, 4006}
    all_x, all_ids = np.vstack([x, extra]), np.arange(1, 4006)
    live = ~np.isin(all_ids, list(loaded._tombstones))
    assert recall(loaded, all_x[live], all_ids[live]) >= 0.9


def test_an_untrainable_ivfpq_index_is_exact():
    rng = np.random.default_rng(6)
    x = unit(rng, 20, 64)
    index = VectorIndex.build(
        64, "ivfpq", 20, x, [(list(range(1, 21)), x)], None, IndexSettings(m=16)
    )
    assert index.delta == 20 and not index.delta_due()
    assert index.search(x[3], 1)[0][0][0] == 4


def test_a_removed_vector_of_a_built_ivfpq_main_is_left_out_and_its_neighbour_kept(tmp_path):
    # FAISS's IndexIDMap translates only the outer selector from positions to ids: the
    # IVF under the re-rank needs its own translated one, or it drops the wrong vector
    rng = np.random.default_rng(7)
    x = unit(rng, 3000, 64)
    ids = np.arange(10, 30010, 10)  # ids unlike positions
    params = IndexSettings(m=16, nprobe=64, k_factor=16)
    index = VectorIndex.build(64, "ivfpq", 3000, x, [(ids.tolist(), x)], tmp_path / "i", params)
    assert index.search(x[5], 1)[0][0][0] == 60
    index.remove([60])
    hits = index.search(x[5], 10)[0]
    assert len(hits) == 10 and 60 not in {i for i, _ in hits}
    assert index.search(x[6], 1)[0][0][0] == 70  # the vector at position 6 is still found


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivfpq"])
def test_searching_among_given_ids_and_scoring_them_leave_out_the_removed(tmp_path, kind):
    rng = np.random.default_rng(8)
    x = unit(rng, 3000, 64)
    ids = np.arange(1, 3001)
    params = IndexSettings(m=16, nprobe=8, k_factor=16)
    index = VectorIndex.build(
        64, kind, 2500, x, [(ids[:2500].tolist(), x[:2500])], tmp_path / "i", params
    )
    index.add(ids[2500:], x[2500:])  # ivfpq: into the exact delta
    assert index.delta == (500 if kind == "ivfpq" else 0)
    allowed = np.sort(rng.choice(ids, 300, replace=False))
    removed = allowed[::10]
    index.remove(removed.tolist())
    live = np.setdiff1d(allowed, removed)
    asked = np.concatenate([allowed, [4000, 5000]])  # two ids the index never held
    assert index.held(asked).tolist() == live.tolist()
    found, scores = index.score(x[7], asked)
    assert sorted(found.tolist()) == live.tolist()
    exact = x[found - 1] @ x[7]
    assert np.allclose(scores, exact, atol=2e-3 if kind == "ivfpq" else 1e-5)
    best = found[np.argsort(-scores)][:10].tolist()
    for q in range(5):
        hits = index.search_among(x[q], 10, allowed, params.widened(4, 4))
        assert {i for i, _ in hits} <= set(live.tolist())
    hits = index.search_among(x[7], 10, allowed, params.widened(30, 30))
    assert len({i for i, _ in hits} & set(best)) >= 8
    assert index.search_among(x[7], 10, np.empty(0, np.int64)) == []
