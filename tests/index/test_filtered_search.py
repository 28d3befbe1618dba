"""Searches narrowed by a filter, inside the vector search, for every index kind: the hits
are exactly the best of the photos that pass (flat), or all pass with high recall
(hnsw, ivfpq with its delta and tombstones); always ``min(k, photos passing)`` of them;
removed photos never come back; counts agree with a brute force over the rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from groundsearch.index.filters import filtered_search
from groundsearch.index.filters import sql as filter_sql
from groundsearch.index.filters.conditions import PhotoFilter
from groundsearch.index.filters.filtered_search import PLANS
from groundsearch.index.gallery import Gallery
from groundsearch.index.search.index_kinds import IndexSettings
from groundsearch.index.store import records
from groundsearch.index.store.photo_metadata import PhotoMetadata
from tests.bench import load_script
from tests.index.synthetic import DIM, ID, search_images, vecs

DAY = 86_400.0
T0 = 1_600_000_000.0  # 2020-09-13
PLACES = {"paris": (48.8566, 2.3522), "tokyo": (35.6762, 139.6503), "fiji": (-17.0, 179.95)}
FOLDERS = ("/photos/a", "/photos/a/x", "/photos/a/x/y", "/photos/ab", "/photos/b")
CAMERAS = ("Apple iPhone 12", "Canon EOS 5D", "FUJIFILM X100V")
N, N_LATE = 480, 80  # photos before the index is built, and after (ivfpq: its delta)


def km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Great-circle distance (spherical law of haversines, written out independently)."""
    (p1, l1), (p2, l2) = (tuple(map(math.radians, x)) for x in (a, b))
    h = math.sin((p2 - p1) / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin((l2 - l1) / 2) ** 2
    return 2 * 6371.0088 * math.asin(math.sqrt(h))


def passes(row: dict, f: PhotoFilter) -> bool:
    """The filter's meaning, row by row (the reference the searches are held to)."""
    t, meta = row["meta"].taken_at, row["meta"]
    if f.after is not None and (t is None or t < f.after):
        return False
    if f.before is not None and (t is None or t >= f.before):
        return False
    if f.folder is not None:
        folder = None if row["uploaded"] else row["path"].rsplit("/", 1)[0]
        under = f.folder.rstrip("/") + "/"
        if folder is None or not (folder == f.folder or folder.startswith(under)):
            return False
    if f.camera is not None and (meta.camera or "").lower() != f.camera.lower():
        return False
    if f.near is not None and (meta.lat is None or km(f.near, (meta.lat, meta.lon)) > f.radius_km):
        return False
    return f.source is None or (f.source == "upload") == row["uploaded"]


def make_rows(n: int, start: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    v = vecs(n, seed=seed)
    rows = []
    for j in range(n):
        i = start + j
        uploaded = i % 9 == 0
        place = None
        if rng.random() < 0.6:
            name = list(PLACES)[i % 3]
            lat, lon = PLACES[name]
            place = (lat + rng.normal(scale=0.05), lon + rng.normal(scale=0.05))
            if name == "fiji":  # across the antimeridian
                place = (place[0], (place[1] + 180) % 360 - 180)
        meta = PhotoMetadata(
            taken_at=None if i % 10 == 3 else T0 + float(rng.integers(0, 1000)) * DAY,
            taken_source="exif",
            camera=None if i % 11 == 4 else CAMERAS[int(rng.integers(0, 3))],
            lat=None if place is None else place[0],
            lon=None if place is None else place[1],
        )
        path = f"uploads/{i}.jpg" if uploaded else f"{FOLDERS[i % len(FOLDERS)]}/{i}.jpg"
        rows.append({"path": path, "uploaded": uploaded, "meta": meta, "vector": v[j]})
    return rows


def insert(gallery: Gallery, rows: list[dict]) -> None:
    with gallery.records.transaction() as db:
        for row in rows:
            row["id"] = records.insert_photo(
                db, f"sha-{row['path']}", row["path"], row["vector"], row["uploaded"], row["meta"]
            )
    gallery.indexes.refresh()


@pytest.fixture(scope="module", params=["flat", "hnsw", "ivfpq"])
def world(request, tmp_path_factory):
    """A gallery of each kind (ivfpq: built over the first photos, then a delta), with
    photos removed from both parts; its live rows."""
    kind = request.param
    gallery = Gallery.create(tmp_path_factory.mktemp(kind) / "g", DIM, ID, kind=kind)
    gallery.indexes.settings = IndexSettings(nlist=16, m=4, nprobe=3, k_factor=8, ef_search=16)
    rows = make_rows(N, 0, seed=1)
    insert(gallery, rows)
    gallery.indexes.compact("images")  # ivfpq: trained and sealed over these
    late = make_rows(N_LATE, N, seed=2)
    insert(gallery, late)
    index = gallery.indexes["images"]
    assert index.kind == kind and index.built
    assert index.delta == (N_LATE if kind == "ivfpq" else 0)
    removed = {row["id"] for row in rows[::13] + late[::13]}
    for image_id in sorted(removed):
        gallery.writes.remove_photo(image_id)
    assert index.tombstones == len(removed)
    live = [row for row in rows + late if row["id"] not in removed]
    yield gallery, live, removed
    gallery.close()


FILTERS = [
    PhotoFilter(after=T0 + 100 * DAY, before=T0 + 130 * DAY),
    PhotoFilter(after=T0 + 500 * DAY),
    PhotoFilter(before=T0 + 50 * DAY),
    PhotoFilter(folder="/photos/a"),
    PhotoFilter(folder="/photos/a/x/"),
    PhotoFilter(folder="/"),
    PhotoFilter(camera="apple IPHONE 12"),
    PhotoFilter(near=PLACES["paris"], within_km=5),
    PhotoFilter(near=PLACES["tokyo"]),
    PhotoFilter(near=(-17.0, -179.98), within_km=8),  # the circle crosses the antimeridian
    PhotoFilter(near=(89.5, 0.0), within_km=20_000),  # every photo with GPS
    PhotoFilter(source="upload"),
    PhotoFilter(source="folder"),
    PhotoFilter(after=T0 + 200 * DAY, folder="/photos/a"),
    PhotoFilter(camera="Canon EOS 5D", near=PLACES["tokyo"], within_km=10),
    PhotoFilter(before=T0 + 300 * DAY, camera="fujifilm x100v", source="folder"),
    PhotoFilter(after=T0, folder="/photos/ab", source="upload"),  # no photo passes
    PhotoFilter(folder="/photos/b", camera="Canon EOS 5D", after=T0 + 600 * DAY),  # < k pass
]
K = 10


def brute(live: list[dict], query: np.ndarray, f: PhotoFilter, k: int) -> list[int]:
    passing = [row for row in live if passes(row, f)]
    scores = np.array([float(row["vector"] @ query) for row in passing])
    return [passing[i]["id"] for i in np.argsort(-scores, kind="stable")[:k]]


@pytest.mark.parametrize("f", FILTERS, ids=lambda f: ",".join(f.conditions))
def test_every_plan_answers_min_k_passing_hits_the_best_of_them(world, f):
    gallery, live, removed = world
    index = gallery.indexes["images"]
    passing = {row["id"] for row in live if passes(row, f)}
    assert gallery.count_images(f) == len(passing)
    queries = vecs(6, seed=77)
    recalls = []
    for plan in (None, *PLANS):
        for q in queries:
            hits = gallery.filtered.search(q, K, f, plan=plan)
            ids = [i for i, _ in hits]
            assert len(ids) == len(set(ids)) == min(K, len(passing)), plan
            assert set(ids) <= passing and not set(ids) & removed
            scores = [s for _, s in hits]
            assert scores == sorted(scores, reverse=True)
            truth = brute(live, q, f, K)
            if index.kind == "flat" or plan == "exact":
                if index.kind == "ivfpq":  # scored from its float16 copies: near ties may swap
                    true = {row["id"]: float(row["vector"] @ q) for row in live}
                    assert [true[i] for i in ids] == pytest.approx(
                        [true[i] for i in truth], abs=2e-3
                    )
                else:
                    assert ids == truth, plan
            if truth:
                recalls.append(len(set(ids) & set(truth)) / len(truth))
    if recalls:
        assert np.mean(recalls) >= 0.8


def test_the_gallery_verbs_take_a_filter_and_leave_unfiltered_searches_as_they_were(world):
    gallery, live, _ = world
    q = vecs(1, seed=5)[0]
    plain = search_images(gallery, q, K)
    unfiltered = search_images(gallery, q, K, PhotoFilter())
    assert search_images(gallery, q, K, None) == plain == unfiltered
    f = PhotoFilter(folder="/photos/a")
    hits = search_images(gallery, q, K, f)
    assert len(hits) == K and all(h.record.path.startswith("/photos/a/") for h in hits)
    assert all(h.record.meta.folder.startswith("/photos/a") for h in hits)
    first = hits[0].id
    similar = gallery.rank_similar(first, K, f)
    assert len(similar) == K and first not in set(similar.ids.tolist())
    assert set(similar.ids.tolist()) <= {row["id"] for row in live if passes(row, f)}
    assert gallery.count_images() == len(live) == gallery.count_images(None)
    assert gallery.count_images(PhotoFilter(source="upload")) == sum(r["uploaded"] for r in live)


class Sized:
    """An index's kind and size, for planning."""

    def __init__(self, kind: str, n: int) -> None:
        self.kind, self.built, self.n = kind, True, n

    def __len__(self) -> int:
        return self.n


def test_the_plan_follows_the_estimated_share(world, monkeypatch):
    gallery, live, _ = world
    index = gallery.indexes["images"]
    search = gallery.filtered
    broad, narrow = PhotoFilter(source="folder"), PhotoFilter(near=PLACES["paris"], within_km=5)
    share, expected = search.estimate(broad)  # the sample is every photo here
    assert share == pytest.approx(sum(not r["uploaded"] for r in live) / len(live))
    assert expected["source"] == pytest.approx(share * len(live))
    assert search.estimate(narrow)[0] == pytest.approx(
        sum(passes(r, narrow) for r in live) / len(live)
    )
    if index.kind == "flat":
        assert search.plan(index, 0.4, K, {}) == "exact"
        assert search.plan(index, 0.6, K, {}) == "overfetch"
        return
    few = {"date": 0.01 * len(live)}
    assert search.plan(index, 0.01, K, few) == "exact"  # few photos: all scored exactly
    # at 1M: many photos pass: overfetching 27 hits costs less than scoring 900k of them
    big = Sized(index.kind, 1_000_000)
    assert search.plan(big, 0.9, K, {"date": 900_000}) == "overfetch"
    middle = "selector" if index.kind == "ivfpq" else "exact"  # HNSW: no selector
    assert search.plan(big, 0.01, K, {"date": 10_000}) == middle
    assert search.plan(big, 0.001, K, {"date": 1_000}) == "exact"
    assert search.plan(big, 0.02, K, {"date": 20_000}) == middle
    assert search.plan(big, 0.05, K, {"near": 50_000}) == "overfetch"  # near: rows cost more
    called = []
    monkeypatch.setattr(index, "search_among", lambda *a: called.append(a) or [])
    hits = search.search(vecs(1, seed=9)[0], K, PhotoFilter(folder="/photos/a/x"), "selector")
    assert called and len(hits) == K  # the selector came back short: scored exactly


def test_an_approximate_index_short_of_hits_falls_back_to_exact_scores(tmp_path):
    gallery = Gallery.create(tmp_path / "g", DIM, ID, kind="ivfpq")
    gallery.indexes.settings = IndexSettings(nlist=32, m=4, nprobe=1, k_factor=1)
    rows = make_rows(600, 0, seed=3)
    insert(gallery, rows)
    gallery.indexes.compact("images")
    f = PhotoFilter(camera="canon eos 5d", before=T0 + 100 * DAY)  # about 3 % pass
    passing = [row for row in rows if passes(row, f)]
    assert K <= len(passing) < 30
    index = gallery.indexes["images"]
    ids = np.array(sorted(row["id"] for row in passing))
    settings = filtered_search.widened(index.settings, len(ids) / len(rows), graph=True)
    short = [len(index.search_among(q, K, ids, settings)) < K for q in vecs(10, seed=4)]
    assert any(short)  # the index alone would come back short
    for q in vecs(10, seed=4):
        true = {row["id"]: float(row["vector"] @ q) for row in rows}
        for plan in PLANS:
            hits = gallery.filtered.search(q, K, f, plan=plan)
            assert len(hits) == K
            assert [true[i] for i, _ in hits] == pytest.approx(
                [true[i] for i in brute(rows, q, f, K)], abs=2e-3
            )
    gallery.close()


def test_a_filter_sees_metadata_filled_in_place_and_photos_added_since(tmp_path):
    gallery = Gallery.create(tmp_path / "g", DIM, ID, kind="flat")
    rows = make_rows(40, 0, seed=6)
    for row in rows:
        row["meta"] = PhotoMetadata()  # not read yet (a format-2 photo)
    insert(gallery, rows)
    f = PhotoFilter(camera="Nikon Z6")
    assert gallery.count_images(f) == 0 and search_images(gallery, rows[0]["vector"], 5, f) == []
    with gallery.records.transaction() as db:
        assert records.fill_metadata(db, rows[0]["id"], PhotoMetadata(camera="NIKON Z6"))
    assert [h.id for h in search_images(gallery, rows[5]["vector"], 5, f)] == [rows[0]["id"]]
    late = make_rows(3, 40, seed=7)
    late[0]["meta"] = PhotoMetadata(camera="nikon z6")
    insert(gallery, late)
    hits = search_images(gallery, late[0]["vector"], 5, f)
    assert [h.id for h in hits] == [late[0]["id"], rows[0]["id"]]
    assert gallery.count_images(f) == 2
    gallery.close()


def test_the_records_answer_each_plan_of_a_filter_from_their_indexes(world):
    gallery, live, _ = world
    db = gallery.records.reader()
    for f in FILTERS:
        truth = sorted(row["id"] for row in live if passes(row, f))
        names = f.conditions
        # every order of lookups and checks the estimates can make gives the same ids
        for expected in (None, dict.fromkeys(names, 0.0), dict.fromkeys(names, 1e9)):
            for first in names:
                plan = dict(expected or {}, **{first: -1.0})
                assert load_script("sql_ids").matching_ids(db, f, plan).tolist() == truth, (f, plan)
        for name, (sql, args) in filter_sql.filter_conditions(f).items():
            plan = db.execute(f"EXPLAIN QUERY PLAN SELECT id FROM photos WHERE {sql}", args)
            detail = " ".join(str(row[-1]) for row in plan)
            assert "USING COVERING INDEX" in detail, (name, detail)  # no row (vector) read


def test_the_short_disk_kind_answers_min_k_passing_hits_by_every_plan(tmp_path):
    gallery = Gallery.create(tmp_path / "g", DIM, ID, kind="ivfopq")
    gallery.indexes.settings = IndexSettings(nlist=16, m=4, nprobe=3, k_factor=8)
    rows = make_rows(600, 0, seed=1)
    insert(gallery, rows)
    gallery.indexes.compact("images")
    late = make_rows(50, 600, seed=2)
    insert(gallery, late)
    assert gallery.indexes["images"].built
    gallery.writes.remove_photo(rows[3]["id"])
    live = [row for row in rows + late if row["id"] != rows[3]["id"]]
    for f in FILTERS:
        passing = {row["id"] for row in live if passes(row, f)}
        for plan in (None, *PLANS):
            for q in vecs(3, seed=5):
                ids = [i for i, _ in gallery.filtered.search(q, K, f, plan=plan)]
                assert len(ids) == len(set(ids)) == min(K, len(passing)), (f, plan)
                assert set(ids) <= passing
    gallery.close()
