"""The filter columns held in memory answer every filter as the rows' meaning does —
from their indexes, from the rows read since (the tail), after a reindex, after photos
are removed and after metadata is filled in place; the sketch keeps true neighbours
where vectors have structure and refuses an isotropic cloud."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.index.filters import columns as filter_columns
from groundsearch.index.filters.columns import FilterColumns
from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.gallery import Gallery
from groundsearch.index.search import vectors
from groundsearch.index.search.sketches import Sketch
from groundsearch.index.search.vectors import VectorIndex
from groundsearch.index.store import records
from groundsearch.index.store.photo_metadata import PhotoMetadata
from tests.index.synthetic import DIM, ID
from tests.index.test_filtered_search import FILTERS, T0, insert, make_rows, passes


def read(gallery: Gallery, columns: FilterColumns) -> None:
    with gallery.records.snapshot() as db:
        columns.refresh(db)


def check(columns: FilterColumns, live: list[dict]) -> None:
    ids = [row["id"] for row in live]
    assert len(columns) == len(live)
    for f in FILTERS:
        truth = sorted(row["id"] for row in live if passes(row, f))
        assert columns.matching(f).tolist() == truth, f
        assert columns.count(f) == len(truth)
        some = [*ids[::4], 10**9]
        assert columns.passing(some, f).tolist() == sorted(set(some) & set(truth)), f
    assert columns.matching(PhotoFilter()).tolist() == sorted(ids)


@pytest.mark.parametrize("reindex_min", [10**9, 1], ids=["tail", "reindexed"])
def test_the_columns_follow_additions_removals_and_edits(tmp_path, monkeypatch, reindex_min):
    monkeypatch.setattr(filter_columns, "REINDEX_MIN", reindex_min)
    monkeypatch.setattr(filter_columns, "REINDEX_SHARE", 0.0)
    gallery = Gallery.create(tmp_path / "g", DIM, ID, kind="flat")
    rows = make_rows(300, 0, seed=1)
    unread = rows[::7]
    for row in unread:
        row["meta"] = PhotoMetadata()  # not read yet: filled in place below
    insert(gallery, rows[:200])
    columns = FilterColumns()  # reads the first 200 and indexes them
    read(gallery, columns)
    insert(gallery, rows[200:])  # the tail (or reindexed, with reindex_min 1)
    read(gallery, columns)
    check(columns, rows)
    removed = {row["id"] for row in rows[::11]}
    for image_id in sorted(removed):
        gallery.writes.remove_photo(image_id)
    filled = make_rows(len(unread), 1000, seed=9)
    with gallery.records.transaction() as db:
        for row, new in zip(unread, filled, strict=True):
            if records.fill_metadata(db, row["id"], new["meta"]):
                row["meta"] = new["meta"]
    read(gallery, columns)
    check(columns, [row for row in rows if row["id"] not in removed])
    gallery.close()


def test_a_new_camera_or_folder_after_the_index_is_found_in_the_tail(tmp_path):
    gallery = Gallery.create(tmp_path / "g", DIM, ID, kind="flat")
    rows = make_rows(50, 0, seed=2)
    insert(gallery, rows)
    columns = FilterColumns()
    read(gallery, columns)
    late = make_rows(2, 50, seed=3)
    late[0]["meta"] = PhotoMetadata(taken_at=T0, camera="Leica Q2")
    late[0]["path"] = "/photos/new/one.jpg"
    late[0]["uploaded"] = False
    insert(gallery, late)
    read(gallery, columns)
    assert columns.matching(PhotoFilter(camera="LEICA q2")).tolist() == [late[0]["id"]]
    assert columns.matching(PhotoFilter(folder="/photos/new")).tolist() == [late[0]["id"]]
    gallery.close()


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    """Unit vectors around 200 centres in a 24-d subspace, with a little noise: the
    shape of a joint space (far from isotropic)."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(dim, 24)))[0]
    centres = rng.normal(size=(200, 24))
    x = centres[rng.integers(0, 200, n)] + rng.normal(scale=0.3, size=(n, 24))
    x = x @ basis.T + rng.normal(scale=0.02, size=(n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_a_sketch_is_trained_only_where_it_keeps_the_true_neighbours():
    rng = np.random.default_rng(0)
    isotropic = rng.normal(size=(6000, 128)).astype(np.float32)
    assert Sketch.train(isotropic) is None
    sketch = Sketch.train(clustered(6000, 128, seed=1))
    assert sketch is not None


def test_a_keeper_trains_once_large_extends_and_starts_over_for_a_new_main():
    from groundsearch.index.search.sketches import SketchKeeper

    x = clustered(9000, 128, seed=2)
    keeper, main = SketchKeeper(start=5000, sample=3000), object()
    assert keeper.of(main, x[:4000]) is None  # too small
    first = keeper.of(main, x[:6000])
    assert first is not None and first.n == 6000
    again = keeper.of(main, x)
    assert again is first and first.n == 9000  # the same main grew: extended
    rebuilt = keeper.of(object(), x)
    assert rebuilt is not None and rebuilt is not first and rebuilt.n == 9000
    noise = np.random.default_rng(0).normal(size=(6000, 128)).astype(np.float32)
    other = SketchKeeper(start=5000, sample=3000)
    assert other.of(main, noise) is None  # untrustworthy: not retried until it doubles
    assert other.of(main, noise[:5999]) is None


def test_the_likeliest_scored_are_the_best_of_many_ids(monkeypatch):
    monkeypatch.setattr(vectors, "SKETCH_FROM", 5_000)
    x = clustered(20_000, 128, seed=4)
    index = VectorIndex(128, "hnsw")
    index.add(range(1, len(x) + 1), x)
    index.remove([5, 6, 7])
    ids = np.arange(1, len(x) + 1, 2, dtype=np.int64)  # half of them
    queries = clustered(20, 128, seed=5)
    found = 0
    for q in queries:
        got_ids, got = index.score_likeliest(q, ids, 10)
        assert got_ids.size < ids.size / 4  # not every id was scored
        assert 7 not in got_ids and 5 not in got_ids
        allowed = ids[~np.isin(ids, [5, 7])]
        truth = allowed[np.argsort(-(x[allowed - 1] @ q))[:10]]
        top = got_ids[np.argsort(-got)[:10]]
        assert got == pytest.approx(x[got_ids - 1] @ q, abs=1e-5)  # exact scores
        found += np.isin(truth, top).sum()
    assert found / (10 * len(queries)) >= 0.98


def test_a_format_3_database_made_before_the_edits_log_gets_it_when_opened(tmp_path):
    gallery = Gallery.create(tmp_path / "g", DIM, ID, kind="flat")
    rows = make_rows(3, 0, seed=5)
    for row in rows:
        row["meta"] = PhotoMetadata()
    insert(gallery, rows)
    path = gallery.records.path
    gallery.close()
    with records.Records(path).transaction() as db:  # as the previous release left it
        db.execute("DROP TRIGGER photo_edited")
        db.execute("DROP TABLE edits")
    store = records.Records(path)
    with store.transaction() as db:
        assert records.fill_metadata(db, rows[1]["id"], PhotoMetadata(camera="Leica Q2"))
    assert [item for _, item in records.edits_after(store.reader(), 0)] == [rows[1]["id"]]
    store.close()
