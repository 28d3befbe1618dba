"""A gallery's photo vectors in shards (``id mod S``), searched through a front that fans
out and merges: the same hits and scores as the one-piece exact index, unfiltered and
through every filtered plan; photos added and removed after the shards were written
reach the shard that owns them; the merge's order and what is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from groundsearch.index.errors import StoreError
from groundsearch.index.filters.filtered_search import PLANS
from groundsearch.index.gallery import Gallery
from groundsearch.index.search import index_kinds
from groundsearch.index.search import shards as shards_module
from groundsearch.index.search.index_kinds import IndexSettings
from groundsearch.index.search.shards import (
    MANIFEST,
    LocalFanout,
    Shard,
    ShardedIndex,
    ShardSet,
    merge_hits,
    shard_of,
    write_shards,
)
from groundsearch.index.search.vectors import VectorIndex
from groundsearch.index.store import records
from groundsearch.service.core.sharding import open_sharded
from tests.index.synthetic import DIM, ID, vecs
from tests.index.test_filtered_search import FILTERS, insert, make_rows

N = 480


def test_merge_takes_the_best_k_highest_score_first_ties_by_smaller_id():
    a = [(8, 0.9), (2, 0.5), (4, 0.1)]
    b = [(7, 0.95), (3, 0.5), (1, 0.5)]
    assert merge_hits([a, b], 4) == [(7, 0.95), (8, 0.9), (1, 0.5), (2, 0.5)]
    assert merge_hits([a, [], b], 10) == [
        (7, 0.95),
        (8, 0.9),
        (1, 0.5),
        (2, 0.5),
        (3, 0.5),
        (4, 0.1),
    ]
    assert merge_hits([[], []], 3) == []
    assert shard_of([1, 2, 3, 4], 2).tolist() == [1, 0, 1, 0]


def front(shard_set: ShardSet) -> tuple[ShardedIndex, LocalFanout]:
    fanout = LocalFanout([Shard.open(shard_set, s) for s in range(shard_set.shards)])
    return ShardedIndex(fanout, shard_set), fanout


@pytest.fixture(scope="module", params=[2, 3])
def world(request, tmp_path_factory):
    """A flat gallery with photos removed, written into shards; then photos added and
    removed after the shards, which the front (a read-only sharded gallery) pushes."""
    shards = request.param
    root = tmp_path_factory.mktemp(f"shards{shards}")
    gallery = Gallery.create(root / "g", DIM, ID, kind="flat")
    rows = make_rows(N, 0, seed=1)
    insert(gallery, rows)
    first = {row["id"] for row in rows[::13]}
    for image_id in sorted(first):
        gallery.writes.remove_photo(image_id)
    shard_set = write_shards(root / "g", root / "shards", shards)
    late = make_rows(40, N, seed=2)
    insert(gallery, late)
    gone = {row["id"] for row in rows[1::17] + late[::7]} - first
    for image_id in sorted(gone):
        gallery.writes.remove_photo(image_id)
    images, fanout = front(shard_set)
    sharded = open_sharded(root / "g", images, ID)
    yield gallery, sharded, shard_set, fanout
    sharded.close()
    gallery.close()
    fanout.close()


def test_shards_split_the_photos_by_id_mod_s_and_say_so(world):
    gallery, _, shard_set, fanout = world
    doc = json.loads((shard_set.folder / MANIFEST).read_text())
    assert doc["scheme"] == "id mod shards" and doc["shards"] == shard_set.shards
    assert doc["kind"] == "flat" and doc["dim"] == DIM and doc["identity"] == ID
    with gallery.records.snapshot() as db:
        written = [i for i in records.photo_ids(db) if i <= shard_set.last_id]
    for s, shard in enumerate(fanout.members):
        mine = shard.index.held(np.asarray(written, np.int64))
        assert np.all(shard_of(mine, shard_set.shards) == s)
    assert sum(shard_set.counts) >= len(written) - len(written) // 10  # before later removals


def test_the_front_answers_as_the_one_piece_index(world):
    gallery, sharded, _, _ = world
    assert sharded.counts()["images"] == gallery.counts()["images"]
    assert sharded.indexes["images"].last_id == gallery.indexes["images"].last_id
    for q in vecs(12, seed=5):
        for k in (1, 10, 50, 10_000):
            assert sharded.rank_images(q, k) == gallery.rank_images(q, k)
    batch = vecs(4, seed=6)
    assert sharded.indexes["images"].search(batch, 7) == [
        gallery.indexes["images"].search(q, 7)[0] for q in batch
    ]
    assert sharded.rank_similar(5, 8).ids.tolist() == gallery.rank_similar(5, 8).ids.tolist()


@pytest.mark.parametrize("f", FILTERS, ids=lambda f: ",".join(f.conditions))
def test_filtered_search_over_shards_is_the_one_piece_answer_for_every_plan(world, f):
    gallery, sharded, _, _ = world
    assert sharded.count_images(f) == gallery.count_images(f)
    for q in vecs(4, seed=9):
        for plan in (None, *PLANS):
            assert sharded.filtered.search(q, 10, f, plan=plan) == gallery.filtered.search(
                q, 10, f, plan=plan
            ), plan
        assert sharded.rank_images(q, 10, f) == gallery.rank_images(q, 10, f)


def test_photos_added_and_removed_after_sharding_reach_their_shard(world, tmp_path):
    gallery, sharded, shard_set, fanout = world
    new = make_rows(5, 10_000, seed=3)
    insert(gallery, new)
    sharded.indexes.refresh()
    q = np.asarray(new[2]["vector"])
    assert sharded.rank_images(q, 1).ids[0] == new[2]["id"]
    gallery.writes.remove_photo(new[2]["id"])
    sharded.indexes.refresh()
    assert sharded.rank_images(q, 3) == gallery.rank_images(q, 3)
    owner = fanout.members[new[2]["id"] % shard_set.shards]
    assert owner.index.tombstones >= 1
    # a restarted front replays from the manifest's watermark: the shards take each once
    again = ShardedIndex(fanout, shard_set)
    assert again.last_id == shard_set.last_id
    with gallery.records.snapshot() as db:
        ids, vectors = records.vectors_after(db, "images", again.last_id, DIM)
    before = len(sharded.indexes["images"])
    again.add(ids, vectors)
    again._read_infos()
    assert len(again) == before


def gallery_of_1500(folder) -> Gallery:
    """A flat gallery of 1,500 photos, enough to train the compressed kinds."""
    gallery = Gallery.create(folder, DIM, ID, kind="flat")
    rows = [
        {
            "path": f"/p/{i}.jpg",
            "uploaded": False,
            "meta": make_rows(1, 0, 0)[0]["meta"],
            "vector": v,
        }
        for i, v in enumerate(vecs(1500, seed=4))
    ]
    insert(gallery, rows)
    return gallery


def test_ivfpq_shards_are_mapped_and_find_what_exact_search_finds(tmp_path):
    gallery = gallery_of_1500(tmp_path / "g")
    settings = IndexSettings(nlist=16, m=4, nprobe=8, k_factor=16)
    shard_set = write_shards(tmp_path / "g", tmp_path / "s", 2, kind="ivfpq", settings=settings)
    assert shard_set.kind == "ivfpq" and shard_set.counts == (750, 750)
    assert list((tmp_path / "s" / "shard-0").glob("images-*.main.faiss"))
    images, fanout = front(shard_set)
    assert images.built and "IVF16,PQ4" in images.describe()
    hits = 0
    for q in vecs(20, seed=8):
        got = {i for i, _ in images.search(q, 10)[0]}
        hits += len(got & set(gallery.rank_images(q, 10).ids.tolist()))
    assert hits / 200 >= 0.8
    fanout.close()
    gallery.close()


def test_what_is_refused(tmp_path):
    with pytest.raises(StoreError, match="no shards at"):
        ShardSet.read(tmp_path / "none")
    gallery = Gallery.create(tmp_path / "g", DIM, ID, kind="flat")
    insert(gallery, make_rows(30, 0, seed=1))
    with pytest.raises(ValueError, match="shards must be a positive int"):
        write_shards(tmp_path / "g", tmp_path / "s", 0)
    shard_set = write_shards(tmp_path / "g", tmp_path / "s", 2)
    with pytest.raises(ValueError, match="shard must be in"):
        Shard.open(shard_set, 2)
    with pytest.raises(ValueError, match="1 shard servers for 2 shards"):
        ShardedIndex(LocalFanout([Shard.open(shard_set, 0)]), shard_set)
    other = Gallery.create(tmp_path / "h", DIM, {"checkpoint_sha256": "d" * 64}, kind="flat")
    images, fanout = front(shard_set)
    with pytest.raises(StoreError, match="another gallery"):
        open_sharded(tmp_path / "h", images)
    (tmp_path / "s" / "shard-1" / "images.json").unlink()
    with pytest.raises(StoreError, match=r"shard 1 .* is missing"):
        Shard.open(shard_set, 1)
    fanout.close()
    other.close()
    gallery.close()


def test_the_front_is_no_vector_index_and_answers_for_itself(world):
    """The front subclasses nothing: what it does not answer itself (``SearchIndex``,
    checked by mypy) cannot fall through to an empty index of its own."""
    images = world[1].indexes["images"]
    assert isinstance(images, ShardedIndex) and ShardedIndex.__mro__ == (ShardedIndex, object)
    assert not isinstance(images, VectorIndex) and not hasattr(images, "seal")


@pytest.mark.parametrize(
    ("room", "kind", "store"),
    [("sq8", "ivfpq", "Refine(SQ8)"), ("none", "ivfopq", "OPQ")],
)
def test_auto_shards_fit_the_disk_every_shard_is_written_on(
    tmp_path, monkeypatch, room, kind, store
):
    monkeypatch.setattr(index_kinds, "EXACT_UP_TO", 50)
    monkeypatch.setattr(index_kinds, "COMPRESSED_FROM", 100)
    gallery = gallery_of_1500(tmp_path / "g")
    # both shards' copies on one disk: room for 8-bit copies of all 1,500 vectors, or none
    sq8 = 2 * 1500 * (DIM + 100)
    monkeypatch.setattr(shards_module, "disk_free", lambda out: sq8 if room == "sq8" else 0)
    settings = IndexSettings(nlist=16, m=4, nprobe=8, k_factor=16)
    shard_set = write_shards(tmp_path / "g", tmp_path / "s", 2, kind="auto", settings=settings)
    assert shard_set.kind == kind and shard_set.counts == (750, 750)
    images, fanout = front(shard_set)
    assert store in images.describe()
    fanout.close()
    gallery.close()
