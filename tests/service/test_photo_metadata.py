"""Every image hit carries what its photo's file says — taken (with its source), camera,
place, width, height, folder — on /search, /images/{id}/similar and /arithmetic, for
indexed photos with real EXIF blocks and for uploads; the OpenAPI document states them."""

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
from tests.exif_photos import Exif, photo_bytes, write_photo

TOKEN = "a-long-enough-write-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
FLICKR = get_settings().flickr8k_dir
PHONE = Exif(
    original="2024:07:01 18:03:05",
    offset="+02:00",
    make="Apple",
    model="iPhone 12",
    orientation=6,
    lat=48.8583,
    lon=2.2945,
)
CANON = Exif(original="2019:12:31 23:59:59", make="Canon", model="Canon EOS R5")
MTIME = datetime(2021, 3, 4, 5, 6, 7, tzinfo=UTC).timestamp()


def real_photos(n: int) -> list[Path]:
    names = sorted((FLICKR / "Flickr_8k.testImages.txt").read_text().split())[:n]
    return [FLICKR / "Images" / name for name in names]


@pytest.fixture(scope="module")
def served(tmp_path_factory, parser):
    """A gallery of three real photos (a phone's EXIF, a camera's, none) indexed by
    ``groundsearch index``'s path, served with a write token; four more photos to upload."""
    root = tmp_path_factory.mktemp("exif") / "photos"
    photos = [Image.open(p) for p in real_photos(5)]
    write_photo(root / "phone" / "phone.jpg", photos[0], PHONE)
    write_photo(root / "canon.jpg", photos[1], CANON)
    plain = write_photo(root / "plain.jpg", photos[2])
    os.utime(plain, (MTIME, MTIME))
    index = root.parent / "gallery"
    index_photos([root], index, get_settings().default_checkpoint, parser, workers=0)
    settings = ServiceSettings(
        index_dir=index,
        cache_dir=parser.cache_dir,
        write_token=TOKEN,
        parse_workers=0,
        caption_bank="none",
    )
    components = Components.load(settings, parser=parser)
    with TestClient(create_app(settings, components)) as client:
        yield client, root, photos[3:]


def every_hit(answer: dict) -> dict[str, dict]:
    return {hit["file"]: hit for hit in answer["results"] + answer["weak"]}


def test_search_hits_carry_what_each_file_says(served):
    client, root, _ = served
    res = client.post("/search", params={"text": "a dog runs", "k": 3, "min_relevance": 0})
    assert res.status_code == 200, res.text
    hits = every_hit(res.json())
    assert set(hits) == {"phone.jpg", "canon.jpg", "plain.jpg"}
    width, height = Image.open(real_photos(1)[0]).size
    phone = hits["phone.jpg"]
    assert {k: phone[k] for k in ("taken", "taken_source", "camera", "width", "height")} == {
        "taken": "2024-07-01T18:03:05+02:00",
        "taken_source": "exif",
        "camera": "Apple iPhone 12",
        "width": width,  # upright: the file stores it turned
        "height": height,
    }
    assert phone["place"] == {
        "lat": pytest.approx(48.8583, abs=1e-6),
        "lon": pytest.approx(2.2945, abs=1e-6),
    }
    assert phone["folder"] == str(root / "phone") and phone["source"] == "folder"
    canon = hits["canon.jpg"]
    assert (canon["taken"], canon["camera"], canon["place"]) == (
        "2019-12-31T23:59:59",
        "Canon EOS R5",
        None,
    )
    plain = hits["plain.jpg"]
    assert (plain["taken"], plain["taken_source"], plain["camera"], plain["folder"]) == (
        "2021-03-04T05:06:07+00:00",
        "file",
        None,
        str(root),
    )


def test_similar_and_arithmetic_hits_carry_it_too(served):
    client, _, _ = served
    found = client.post("/search", params={"text": "a dog", "k": 3, "min_relevance": 0})
    ids = {h["file"]: h["id"] for h in every_hit(found.json()).values()}
    similar = client.get(f"/images/{ids['plain.jpg']}/similar", params={"min_relevance": 0})
    assert similar.status_code == 200, similar.text
    assert every_hit(similar.json())["phone.jpg"]["camera"] == "Apple iPhone 12"
    moved = client.post(
        "/arithmetic", params={"image_id": ids["canon.jpg"], "plus": "snow", "min_relevance": 0}
    )
    assert moved.status_code == 200, moved.text
    assert every_hit(moved.json())["phone.jpg"]["taken"] == "2024-07-01T18:03:05+02:00"


def test_an_upload_keeps_its_exif_and_has_no_folder(served):
    client, _, more = served
    shot = photo_bytes(more[0], CANON)
    res = client.post(
        "/gallery/images", files={"image": ("IMG_7.jpg", shot, "image/jpeg")}, headers=AUTH
    )
    assert res.status_code == 201, res.text
    plain = client.post(
        "/gallery/images",
        files={"image": ("scan.jpg", photo_bytes(more[1]), "image/jpeg")},
        headers=AUTH,
    )
    assert plain.status_code == 201, plain.text
    answer = client.post("/search", params={"text": "a dog", "k": 5, "min_relevance": 0})
    hits = {h["id"]: h for h in answer.json()["results"] + answer.json()["weak"]}
    upload, scan = hits[res.json()["id"]], hits[plain.json()["id"]]
    assert (upload["source"], upload["folder"], upload["taken"], upload["camera"]) == (
        "upload",
        None,
        "2019-12-31T23:59:59",
        "Canon EOS R5",
    )
    assert (upload["width"], upload["height"]) == more[0].size
    # an upload has no meaningful file time: no EXIF date, no date
    assert (scan["taken"], scan["taken_source"], scan["place"]) == (None, None, None)
    assert (scan["width"], scan["height"]) == more[1].size


def test_the_schema_describes_the_hit_fields(served):
    client, _, _ = served
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    hit = schemas["ImageHit"]
    for field in ("taken", "taken_source", "camera", "place", "width", "height", "folder"):
        assert hit["properties"][field]["description"], field
        assert field in hit["required"]  # always present, null when unknown
    assert set(schemas["Place"]["properties"]) == {"lat", "lon"}
    assert schemas["Place"]["properties"]["lat"]["maximum"] == 90
