"""Two shards on a local Ray cluster, each a Ray Serve deployment with one replica: the
front's answers (merged from both, fanned out concurrently) are the one-piece index's —
ids and scores — for a fixed query set, unfiltered and filtered (every plan); a photo
added after the shards were written is pushed to its shard and found."""

from __future__ import annotations

import numpy as np
import pytest

from groundsearch.index.filters.filtered_search import PLANS
from groundsearch.index.gallery import Gallery
from groundsearch.index.search.shards import write_shards
from tests.index.synthetic import DIM, ID, vecs
from tests.index.test_filtered_search import FILTERS, insert, make_rows

pytestmark = pytest.mark.slow
N = 3000
SHARDS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    ray = pytest.importorskip("ray")
    serve = pytest.importorskip("ray.serve")
    from groundsearch.service.core import sharding

    root = tmp_path_factory.mktemp("ray-shards")
    gallery = Gallery.create(root / "g", DIM, ID, kind="flat")
    rows = make_rows(N, 0, seed=1)
    insert(gallery, rows)
    for row in rows[::29]:
        gallery.writes.remove_photo(row["id"])
    shard_set = write_shards(root / "g", root / "shards", SHARDS)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        fanout = sharding.start_shards(shard_set, cpus=0.25)
        sharded = sharding.sharded_gallery(root / "g", root / "shards", ID)
        yield gallery, sharded, fanout
        sharded.close()
    finally:
        sharding.stop_shards(SHARDS)
        serve.shutdown()
        ray.shutdown()
        gallery.close()


def test_each_shard_is_a_deployment_holding_its_own_photos(cluster):
    gallery, sharded, fanout = cluster
    infos = fanout.call("info", [(), ()])
    assert [i["shard"] for i in infos] == [0, 1]
    assert sum(i["live"] for i in infos) == gallery.counts()["images"]
    assert all(abs(i["live"] - N // 2) < N // 20 for i in infos)
    assert "2 shards (id mod shards)" in sharded.indexes.describe()["images"]


def test_the_merged_answers_are_the_one_piece_index_answers(cluster):
    gallery, sharded, _ = cluster
    for q in vecs(25, seed=11):
        for k in (1, 10, 100):
            assert sharded.rank_images(q, k) == gallery.rank_images(q, k)


@pytest.mark.parametrize("f", FILTERS[:8], ids=lambda f: ",".join(f.conditions))
def test_filtered_answers_are_the_one_piece_answers(cluster, f):
    gallery, sharded, _ = cluster
    assert sharded.count_images(f) == gallery.count_images(f)
    for q in vecs(5, seed=12):
        assert sharded.rank_images(q, 10, f) == gallery.rank_images(q, 10, f)
        for plan in PLANS:
            assert sharded.filtered.search(q, 10, f, plan) == gallery.filtered.search(
                q, 10, f, plan
            )


def test_a_photo_added_after_the_shards_reaches_its_shard(cluster):
    gallery, sharded, _ = cluster
    new = make_rows(3, N, seed=5)
    insert(gallery, new)
    sharded.indexes.refresh()
    q = np.asarray(new[1]["vector"])
    assert sharded.rank_images(q, 5) == gallery.rank_images(q, 5)
    assert sharded.rank_images(q, 1).ids[0] == new[1]["id"]


def test_a_shard_that_is_gone_is_a_store_error_not_a_hang(cluster, monkeypatch):
    """(Last: it stops a shard.) The service answers a StoreError with 503."""
    from ray import serve

    from groundsearch.index.errors import StoreError
    from groundsearch.service.core import sharding

    _, sharded, _ = cluster
    monkeypatch.setattr(sharding, "SHARD_TIMEOUT_S", 3.0)
    serve.delete(f"{sharding.APP_PREFIX}1")
    with pytest.raises(StoreError, match="shard 1 did not answer"):
        sharded.rank_images(vecs(1, seed=3)[0], 10)
