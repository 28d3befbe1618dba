"""Search like a photo library (issue 26): a folder of real photos with EXIF dates, GPS and
turned orientations, indexed; filters inside the search, date order above the relevance
cutoff, pages without gaps or repeats, search by a photo, and 422s naming the parameter."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from groundsearch.common.settings import get_settings
from groundsearch.index.ingest.indexer import index_photos
from groundsearch.service.core.components import Components
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.http.app import create_app
from tests.exif_photos import Exif, write_photo

FLICKR = get_settings().flickr8k_dir
PARIS = (48.8583, 2.2945)
OSLO = (59.9139, 10.7522)
N = 24


def when(i: int) -> datetime:
    """Photo i's time: two a month from January 2023, at a different hour each."""
    return datetime(2023 + i // 12, 1 + i % 12, 1 + i, 8 + i % 9, 30, tzinfo=UTC)


def library(root: Path) -> dict[str, dict]:
    """N real Flickr8k test photos written as a phone or camera would, in three folders:
    EXIF date (UTC offset) for all but every fifth (file time instead), GPS for a third
    (Paris or Oslo), two cameras, every fourth turned (orientation 6)."""
    names = sorted((FLICKR / "Flickr_8k.testImages.txt").read_text().split())[:N]
    out: dict[str, dict] = {}
    for i, name in enumerate(names):
        folder = ("trips/2023", "trips/2024", "home")[i % 3]
        taken = when(i)
        place = (PARIS if i % 2 else OSLO) if i % 3 == 0 else None
        camera = ("Apple", "iPhone 12") if i % 2 else ("Canon", "Canon EOS R5")
        dated = i % 5 != 0
        tags = Exif(
            original=taken.strftime("%Y:%m:%d %H:%M:%S") if dated else None,
            offset="+00:00" if dated else None,
            make=camera[0],
            model=camera[1],
            orientation=6 if i % 4 == 0 else 1,
            lat=place[0] if place else None,
            lon=place[1] if place else None,
        )
        path = write_photo(
            root / folder / f"p{i:02d}.jpg", Image.open(FLICKR / "Images" / name), tags
        )
        if not dated:
            os.utime(path, (taken.timestamp(), taken.timestamp()))
        out[path.name] = {
            "taken": taken.timestamp(),
            "folder": str(path.parent),
            "place": place,
            "camera": "Apple iPhone 12" if i % 2 else "Canon EOS R5",
            "path": path,
        }
    return out


@pytest.fixture(scope="module")
def served(tmp_path_factory, parser):
    root = tmp_path_factory.mktemp("library") / "photos"
    photos = library(root)
    index = root.parent / "gallery"
    index_photos([root], index, get_settings().default_checkpoint, parser, workers=0)
    settings = ServiceSettings(
        index_dir=index, cache_dir=parser.cache_dir, parse_workers=0, caption_bank="none"
    )
    components = Components.load(settings, parser=parser)
    with TestClient(create_app(settings, components)) as client:
        yield client, root, photos


def read_pages(client: TestClient, route: str, k: int, **params) -> tuple[list[dict], list[dict]]:
    """Every page of a query (following ``next``): its hits in order, and each page."""
    hits, pages, cursor = [], [], None
    for _ in range(100):
        query = {**params, "k": k, **({"cursor": cursor} if cursor else {})}
        r = client.post(route, params=query)
        assert r.status_code == 200, r.text
        page = r.json()
        pages.append(page)
        hits += page["results"] + page["weak"]
        cursor = page["next"]
        if cursor is None:
            return hits, pages
    raise AssertionError("no last page")


def passing(photos: dict[str, dict], after=None, before=None, folder=None, near=None, km=1.0):
    from groundsearch.index.filters.conditions import haversine_km

    out = set()
    for name, p in photos.items():
        if after is not None and p["taken"] < after.timestamp():
            continue
        if before is not None and p["taken"] >= before.timestamp():
            continue
        if folder is not None and not (p["folder"] + "/").startswith(folder + "/"):
            continue
        far = p["place"] is None or haversine_km(*near, *p["place"]) > km if near else False
        if far:
            continue
        out.add(name)
    return out


def test_a_date_range_and_folder_query_returns_exactly_the_photos_that_pass_page_by_page(served):
    client, root, photos = served
    after, before = datetime(2023, 3, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC)
    folder = str(root / "trips")
    params = {
        "text": "a dog runs on the grass",
        "after": after.date().isoformat(),
        "before": before.date().isoformat(),
        "folder": folder,
        "min_relevance": 0,
    }
    expect = passing(photos, after, before, folder)
    assert 3 <= len(expect) < N
    hits, pages = read_pages(client, "/search", 3, **params)
    names = [h["file"] for h in hits]
    assert len(names) == len(set(names)) and set(names) == expect  # no gap, no repeat
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(len(p["results"] + p["weak"]) == 3 for p in pages[:-1])
    assert pages[0]["total"] == len(expect) and pages[0]["total_exact"]
    for order, newest in (("date", False), ("-date", True)):
        dated, _ = read_pages(client, "/search", 4, **params, order=order)
        assert [h["file"] for h in dated] == sorted(
            expect, key=lambda n: photos[n]["taken"], reverse=newest
        )
        assert all(h["taken"] for h in dated)


def test_date_order_holds_only_hits_above_the_cutoff(served):
    client, _, _ = served
    params = {"text": "a dog runs on the grass", "k": N}
    ranked = client.post("/search", params=params).json()
    cut = ranked["min_relevance"]
    good = {h["file"] for h in ranked["results"]}
    by_date = client.post("/search", params={**params, "order": "date"}).json()
    assert {h["file"] for h in by_date["results"]} == good
    assert by_date["weak"] == [] and by_date["total"] == len(good)
    assert all(h["relevance"] >= cut for h in by_date["results"])


def test_place_camera_and_source_filters(served):
    client, _, photos = served
    base = {"text": "a person", "k": N, "min_relevance": 0}
    near = client.post("/search", params={**base, "near": "48.8583,2.2945", "within_km": 5}).json()
    got = {h["file"] for h in near["results"]}
    assert got == passing(photos, near=PARIS, km=5) and got
    assert all(h["place"] and abs(h["place"]["lat"] - PARIS[0]) < 1e-3 for h in near["results"])
    canon = client.post("/search", params={**base, "camera": "canon eos r5"}).json()
    assert {h["file"] for h in canon["results"]} == {
        n for n, p in photos.items() if p["camera"] == "Canon EOS R5"
    }
    uploads = client.post("/search", params={**base, "source": "upload"}).json()
    assert uploads["results"] == [] and uploads["weak"] == [] and uploads["total"] == 0


def test_search_by_photo_finds_it_and_steers_with_text(served):
    client, root, photos = served
    name = "p03.jpg"
    data = photos[name]["path"].read_bytes()
    r = client.post(
        "/search/image", params={"k": 3, "min_relevance": 0}, files={"image": (name, data)}
    )
    assert r.status_code == 200, r.text
    first = (r.json()["results"] + r.json()["weak"])[0]
    assert first["file"] == name and first["score"] > 0.99
    home = str(root / "home")
    r = client.post(
        "/search/image",
        params={"k": 30, "min_relevance": 0, "folder": home, "text": "at night"},
        files={"image": (name, data)},
    )
    hits = r.json()["results"] + r.json()["weak"]
    assert {h["file"] for h in hits} == passing(photos, folder=home)
    assert r.json()["query"] == "at night"


def test_similar_takes_filters_and_pages(served):
    client, root, photos = served
    first = client.post("/search", params={"text": "a dog", "k": 1, "min_relevance": 0}).json()
    image_id = (first["results"] + first["weak"])[0]["id"]
    folder = str(root / "trips/2024")
    seen, cursor = [], None
    while True:
        params = {
            "k": 2,
            "min_relevance": 0,
            "folder": folder,
            **({"cursor": cursor} if cursor else {}),
        }
        page = client.get(f"/images/{image_id}/similar", params=params).json()
        seen += [h["file"] for h in page["results"] + page["weak"]]
        cursor = page["next"]
        if cursor is None:
            break
    own = (first["results"] + first["weak"])[0]["file"]
    assert set(seen) == passing(photos, folder=folder) - {own} and len(seen) == len(set(seen))


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"after": "last tuesday"}, "after"),
        ({"before": "2024-13-01"}, "before"),
        ({"after": "2024-06-01", "before": "2024-01-01"}, "before"),
        ({"within_km": 5}, "within_km"),
        ({"near": "91,0"}, "near"),
        ({"near": "0,181"}, "near"),
        ({"near": "paris"}, "near"),
        ({"within_km": 0, "near": "1,1"}, "within_km"),
        ({"source": "camera"}, "source"),
        ({"order": "size"}, "order"),
        ({"cursor": "not-a-cursor"}, "cursor"),
    ],
)
def test_bad_filters_are_422_naming_the_parameter(served, params, parameter):
    client, _, _ = served
    r = client.post("/search", params={"text": "a dog", **params})
    assert r.status_code == 422, r.text
    assert any(e["loc"][:2] == ["query", parameter] for e in r.json()["errors"]), r.json()


def test_a_cursor_of_another_query_is_refused(served):
    client, _, _ = served
    page = client.post("/search", params={"text": "a dog", "k": 2, "min_relevance": 0}).json()
    r = client.post(
        "/search", params={"text": "a cat", "k": 2, "cursor": page["next"], "min_relevance": 0}
    )
    assert r.status_code == 422 and "another query" in r.json()["detail"]
