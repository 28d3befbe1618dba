"""The photo library (issue 27): ``GET /images`` lists a folder of real photos with EXIF
dates by date, a page at a time with the filters of ``/search``; a gallery photo's
thumbnail and its description by id."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from groundsearch.common.settings import get_settings
from groundsearch.index.ingest.indexer import index_photos
from groundsearch.service.core.components import Components
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.http.app import create_app
from tests.exif_photos import Exif, photo_bytes
from tests.service.test_library_search import OSLO, PARIS, N, library, passing

TOKEN = "library-test-write-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def served(tmp_path_factory, parser):
    root = tmp_path_factory.mktemp("library-view") / "photos"
    photos = library(root)
    index = root.parent / "gallery"
    index_photos([root], index, get_settings().default_checkpoint, parser, workers=0)
    settings = ServiceSettings(
        index_dir=index,
        cache_dir=parser.cache_dir,
        parse_workers=0,
        caption_bank="none",
        write_token=TOKEN,
    )
    components = Components.load(settings, parser=parser)
    with TestClient(create_app(settings, components)) as client:
        yield client, root, photos


def pages(client: TestClient, k: int, **params) -> tuple[list[dict], list[dict]]:
    """Every page of ``GET /images`` (following ``next``): the photos, and each page."""
    photos, answers, cursor = [], [], None
    for _ in range(200):
        query = {**params, "k": k, **({"cursor": cursor} if cursor else {})}
        r = client.get("/images", params=query)
        assert r.status_code == 200, r.text
        answers.append(r.json())
        photos += r.json()["results"]
        cursor = r.json()["next"]
        if cursor is None:
            return photos, answers
    raise AssertionError("no last page")


def by_date(photos: dict[str, dict], names, newest: bool = True) -> list[str]:
    return sorted(names, key=lambda n: photos[n]["taken"], reverse=newest)


def test_the_library_lists_every_photo_by_date_page_by_page(served):
    client, _, photos = served
    for order, newest in (("-date", True), ("date", False)):
        for k in (1, 5, 100):
            listed, answers = pages(client, k, order=order)
            names = [p["file"] for p in listed]
            assert names == by_date(photos, photos, newest), (order, k)
            assert all(len(a["results"]) == k for a in answers[:-1])
            assert all(a["total"] == N and a["order"] == order for a in answers)
    first = client.get("/images", params={"k": 1}).json()["results"][0]  # newest first
    assert first["file"] == by_date(photos, photos)[0]
    assert first["thumbnail"] == f"/images/{first['id']}/thumbnail"
    assert first["url"] == f"/images/{first['id']}" and "score" not in first
    assert {"taken", "camera", "place", "folder", "width", "height"} <= set(first)


def test_the_filters_narrow_the_library(served):
    client, root, photos = served
    after, before = datetime(2023, 3, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC)
    folder = str(root / "trips")
    params = {"after": "2023-03-01", "before": "2024-06-01", "folder": folder}
    want = passing(photos, after, before, folder)
    listed, answers = pages(client, 4, **params)
    assert [p["file"] for p in listed] == by_date(photos, want) and 3 <= len(want) < N
    assert answers[0]["total"] == len(want)
    near, _ = pages(client, 2, near=f"{PARIS[0]},{PARIS[1]}", within_km=5, order="date")
    assert [p["file"] for p in near] == by_date(photos, passing(photos, near=PARIS, km=5), False)
    assert near and all(abs(p["place"]["lat"] - PARIS[0]) < 1e-3 for p in near)
    assert not {p["file"] for p in near} & passing(photos, near=OSLO, km=5)
    canon, _ = pages(client, 3, camera="CANON eos r5")
    canons = {n for n, p in photos.items() if p["camera"] == "Canon EOS R5"}
    assert {p["file"] for p in canon} == canons
    empty = client.get("/images", params={"source": "upload"}).json()
    assert empty == {"results": [], "order": "-date", "next": None, "total": 0}


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({"order": "relevance"}, "order"),
        ({"k": 0}, "k"),
        ({"k": 101}, "k"),
        ({"within_km": 5}, "within_km"),
        ({"after": "2024-06-01", "before": "2024-01-01"}, "before"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"before": "0.5"}, "before"),  # a number is not a date (nor epoch seconds)
        ({"after": "20240601"}, "after"),
    ],
)
def test_bad_library_parameters_are_422_naming_them(served, params, parameter):
    client, _, _ = served
    r = client.get("/images", params=params)
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    errors = r.json().get("errors", [])
    assert any(e["loc"][:2] == ["query", parameter] for e in errors) or parameter == "k", r.json()


def test_a_cursor_serves_only_the_filters_and_order_it_was_made_for(served):
    client, root, _ = served
    page = client.get("/images", params={"k": 2}).json()
    for other in ({"order": "date"}, {"folder": str(root / "home")}):
        r = client.get("/images", params={"k": 2, "cursor": page["next"], **other})
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["query", "cursor"]


def test_a_photo_added_or_removed_between_pages_is_neither_repeated_nor_skipped(served):
    client, _, photos = served
    first = client.get("/images", params={"k": 5}).json()
    seen = [p["file"] for p in first["results"]]
    # an upload newer than every photo (before the cursor), one older than all, and one
    # without a date (last); a photo of a later page removed
    newer = Exif(original="2030:01:01 00:00:00", offset="+00:00")
    older = Exif(original="2000:01:01 00:00:00", offset="+00:00")
    added = {}
    for name, tags, colour in (
        ("newer.jpg", newer, (200, 30, 30)),
        ("older.jpg", older, (30, 200, 30)),
        ("undated.jpg", None, (30, 30, 200)),
    ):
        data = photo_bytes(Image.new("RGB", (96, 64), colour), tags)
        r = client.post("/gallery/images", files={"image": (name, data)}, headers=AUTH)
        assert r.status_code == 201, r.text
        added[name] = r.json()["id"]
    later = by_date(photos, photos)[8]
    gone = next(p["id"] for p in pages(client, 100)[0] if p["file"] == later)
    try:
        assert client.delete(f"/gallery/images/{gone}", headers=AUTH).status_code == 200
        rest, _ = pages(client, 4, cursor=first["next"])
        names = [p["file"] for p in rest]
        ids = [p["id"] for p in rest]
        assert added["newer.jpg"] not in ids
        assert ids[-2:] == [added["older.jpg"], added["undated.jpg"]]
        assert rest[-1]["taken"] is None and rest[-2]["taken"].startswith("2000-01-01")
        expect = [n for n in by_date(photos, photos) if n not in seen and n != later]
        assert names[:-2] == expect
        oldest_first, _ = pages(client, 7, order="date")
        assert oldest_first[0]["id"] == added["older.jpg"]
        assert oldest_first[-2:][0]["id"] == added["newer.jpg"]
        assert oldest_first[-1]["id"] == added["undated.jpg"]
    finally:
        for image_id in added.values():
            client.delete(f"/gallery/images/{image_id}", headers=AUTH)


def _image(data: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


def test_a_thumbnail_is_a_small_upright_jpeg_with_validators(served):
    client, _, photos = served
    # camera-sized photos (the shared Flickr8k photos are 224 pixels square): a portrait
    # stored turned (orientation 6, as a phone does), a landscape stored straight
    scene = Image.open(photos["p01.jpg"]["path"])
    added = []
    try:
        for orientation, shown in ((6, (800, 1200)), (1, (1200, 800))):
            data = photo_bytes(scene.resize(shown), Exif(orientation=orientation))
            r = client.post("/gallery/images", files={"image": ("big.jpg", data)}, headers=AUTH)
            added.append(r.json()["id"])
            photo = next(p for p in pages(client, 100)[0] if p["id"] == added[-1])
            assert (photo["width"], photo["height"]) == shown
            r = client.get(photo["thumbnail"])
            assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
            small = _image(r.content)
            assert small.format == "JPEG"
            assert small.size == tuple(round(side * 256 / 1200) for side in shown)
            assert len(r.content) < len(data) / 4
            assert r.headers["cache-control"] == "max-age=86400"
            etag = r.headers["etag"]
            assert etag.startswith('"') and r.headers["last-modified"]
            again = client.get(photo["thumbnail"], headers={"If-None-Match": etag})
            assert again.status_code == 304 and again.content == b""
            assert again.headers["etag"] == etag
            other = client.get(photo["thumbnail"], params={"size": 64})
            assert max(_image(other.content).size) == 64 and other.headers["etag"] != etag
    finally:
        for image_id in added:
            client.delete(f"/gallery/images/{image_id}", headers=AUTH)
    # a size larger than the photo: the photo's own size, never enlarged
    straight = next(p for p in pages(client, 100)[0] if p["file"] == "p01.jpg")
    big = _image(client.get(straight["thumbnail"], params={"size": 2048}).content)
    assert big.size == (straight["width"], straight["height"])


@pytest.mark.parametrize("size", [0, 15, 2049, "big"])
def test_a_thumbnail_size_out_of_range_is_422(served, size):
    client, _, _ = served
    r = client.get("/images/1/thumbnail", params={"size": size})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["query", "size"]


def test_a_photo_gone_from_disk_or_broken_has_no_thumbnail_nor_description(served, tmp_path):
    client, _, _ = served
    data = photo_bytes(Image.new("RGB", (80, 60), (120, 80, 40)), None)
    r = client.post("/gallery/images", files={"image": ("x.jpg", data)}, headers=AUTH)
    image_id = r.json()["id"]
    try:
        stored = client.app.state.components.gallery.photo_path(image_id)
        assert client.get(f"/images/{image_id}/thumbnail").status_code == 200
        stored.write_bytes(b"\xff\xd8 not a jpeg any more")
        for url in (f"/images/{image_id}/thumbnail", f"/images/{image_id}/describe"):
            r = client.get(url)
            assert r.status_code == 404 and "can no longer be read" in r.json()["detail"], url
            assert r.json()["type"] == "/problems/unknown-image"
        stored.unlink()
        for url in (f"/images/{image_id}/thumbnail", f"/images/{image_id}/describe"):
            r = client.get(url)
            assert r.status_code == 404 and "no longer on disk" in r.json()["detail"], url
    finally:
        client.delete(f"/gallery/images/{image_id}", headers=AUTH)
    for url in ("/images/999999/thumbnail", "/images/999999/describe"):
        assert client.get(url).status_code == 404


def test_describing_a_gallery_photo_by_id_answers_as_its_file_uploaded(served):
    client, _, photos = served
    listed, _ = pages(client, 100)
    photo = next(p for p in listed if p["file"] == "p04.jpg")  # stored turned
    by_id = client.get(f"/images/{photo['id']}/describe", params={"k": 3})
    assert by_id.status_code == 200, by_id.text
    data = photos["p04.jpg"]["path"].read_bytes()
    uploaded = client.post("/describe", params={"k": 3}, files={"image": ("p04.jpg", data)})
    a, b = by_id.json(), uploaded.json()
    assert a["generated"] and a["generated"] == b["generated"]
    assert a["concepts"] == b["concepts"] and a["results"] + a["weak"] == b["results"] + b["weak"]
    only = client.get(f"/images/{photo['id']}/describe", params={"sentences": "generated"})
    assert only.json()["generated"] == a["generated"]
    assert only.json()["results"] == []
    assert client.get(f"/images/{photo['id']}/describe", params={"beam": 11}).status_code == 422
