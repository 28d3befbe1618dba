"""A phone's photos over HTTP: HEIC and AVIF (written here by pillow-heif and
pillow-avif-plugin, turned as phones store them, with real EXIF blocks) are added to the
gallery upright with their metadata and served as stored; ``/describe`` and
``/arithmetic/upload`` read them; a truncated HEIC is a 422 and a text file named .heic a
415; the OpenAPI document lists their media types."""

from __future__ import annotations

import io
import shutil

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from groundsearch.service.core.components import Components
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.http.app import create_app
from tests.exif_photos import Exif, photo_bytes
from tests.oriented import coffee, oriented_bytes

TOKEN = "a-long-enough-write-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PHONE = Exif(
    original="2024:07:01 18:03:05",
    offset="+02:00",
    make="Apple",
    model="iPhone 15 Pro",
    orientation=6,
    lat=48.8583,
    lon=2.2945,
)
#: Pillow's name, the file suffix and the media type a client sends each with.
KINDS = {"HEIF": ("heic", "image/heic"), "AVIF": ("avif", "image/avif")}


#: What browsers send for an <img>: Chrome's and Firefox's do not name HEIC, Safari's does.
CHROME = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
FIREFOX = "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
SAFARI = (
    "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,"
    "image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def writable(service_gallery, parser, tmp_path_factory):
    index = tmp_path_factory.mktemp("phone-writes") / "gallery"
    shutil.copytree(service_gallery, index)
    settings = ServiceSettings(
        index_dir=index,
        cache_dir=parser.cache_dir,
        write_token=TOKEN,
        parse_workers=0,
        caption_bank="none",
    )
    components = Components.load(settings, parser=parser)
    with TestClient(create_app(settings, components)) as client:
        yield client, components, index


@pytest.fixture(scope="module")
def gallery_photo(service_components) -> tuple[int, Image.Image]:
    gallery = service_components.gallery
    image_id = gallery.image_ids()[0]
    with Image.open(gallery.photo_path(image_id)) as img:
        return image_id, img.convert("RGB")


@pytest.mark.parametrize("fmt", list(KINDS))
def test_a_phone_photo_is_added_upright_with_its_metadata_and_served_as_stored(writable, fmt):
    client, components, index = writable
    suffix, media = KINDS[fmt]
    upright = coffee()
    reference = client.post(  # the upright photo, lossless: the vector to match
        "/gallery/images",
        files={"image": ("upright.png", oriented_bytes(upright, 1), "image/png")},
        headers=AUTH,
    )
    assert reference.status_code == 201, reference.text
    data = photo_bytes(upright, PHONE, fmt)
    res = client.post(
        "/gallery/images",
        files={"image": (f"IMG_0001.{suffix}", data, media)},
        data={"captions": ["A cup of coffee on a saucer ."]},
        headers=AUTH,
    )
    assert res.status_code == 201, res.text
    added = res.json()
    try:
        vector = components.gallery.image_vector(added["id"])
        want = components.gallery.image_vector(reference.json()["id"])
        assert cosine(vector, want) > 0.995
        # the classifier's classes are stored with it (relevance evidence), upright too
        classes, _ = components.gallery.image_classes([added["id"], reference.json()["id"]])
        assert (classes[:, 0] >= 0).all() and classes[0, 0] == classes[1, 0]
        record = components.gallery.image(added["id"])
        assert record.path.endswith(f".{suffix}") and (index / record.path).is_file()
        meta = record.meta
        assert (meta.taken, meta.camera, meta.name) == (
            "2024-07-01T18:03:05+02:00",
            "Apple iPhone 15 Pro",
            f"IMG_0001.{suffix}",
        )
        assert meta.place == (pytest.approx(48.8583, abs=1e-6), pytest.approx(2.2945, abs=1e-6))
        assert (meta.width, meta.height) == upright.size  # as shown
        # served as stored: the turn is in the container, which viewers apply
        served = client.get(added["url"])
        assert served.status_code == 200 and served.content == data
        assert served.headers["content-type"] == media
        hits = client.post(
            "/search", params={"text": "A cup of coffee on a saucer .", "k": 3, "min_relevance": 0}
        ).json()["results"]
        mine = next(h for h in hits if h["id"] == added["id"])
        assert (mine["camera"], mine["taken"]) == ("Apple iPhone 15 Pro", meta.taken)
        # a browser: Chrome shows AVIF but not HEIC, Safari both
        chrome = client.get(added["url"], headers={"Accept": CHROME})
        safari = client.get(added["url"], headers={"Accept": SAFARI})
        assert safari.status_code == 200 and safari.content == data
        assert chrome.status_code == 200, chrome.text
        if fmt == "AVIF":
            assert chrome.content == data and chrome.headers["content-type"] == media
            assert "vary" not in chrome.headers
        else:
            assert chrome.headers["content-type"] == "image/jpeg"
            assert chrome.headers["vary"] == safari.headers["vary"] == "Accept"
            assert chrome.headers["etag"] != served.headers.get("etag")
            with Image.open(io.BytesIO(chrome.content)) as img:  # upright, tag dropped
                assert img.format == "JPEG" and img.size == upright.size
                assert img.getexif().get(0x0112) is None
                assert img.getexif().get(0x0110) == "iPhone 15 Pro"
                diff = np.abs(np.asarray(img, np.int16) - np.asarray(upright, np.int16))
                assert diff.mean() < 4, diff.mean()
    finally:
        for answer in (added, reference.json()):
            client.delete(f"/gallery/images/{answer['id']}", headers=AUTH)


@pytest.mark.parametrize("fmt", list(KINDS))
def test_describe_and_arithmetic_read_a_phone_photo(client_of, gallery_photo, fmt):
    """A gallery photo sent as a turned HEIC or AVIF finds that photo's captions first,
    as its JPEG does, and starts an arithmetic query."""
    image_id, upright = gallery_photo
    suffix, media = KINDS[fmt]
    data = photo_bytes(upright, PHONE, fmt)
    res = client_of.post(
        "/describe",
        params={"k": 5, "min_relevance": 0},
        files={"image": (f"p.{suffix}", data, media)},
    )
    assert res.status_code == 200, res.text
    assert res.json()["results"][0]["image_id"] == image_id
    res = client_of.post(
        "/arithmetic/upload",
        params={"plus": "dog", "k": 2, "min_relevance": 0},
        files={"image": (f"p.{suffix}", data, media)},
    )
    assert res.status_code == 200 and len(res.json()["results"]) == 2, res.text


@pytest.fixture(scope="module")
def client_of(service_components):
    with TestClient(create_app(service_components.settings, service_components)) as c:
        yield c


def test_broken_phone_files_are_refused_with_their_problem(client_of):
    data = photo_bytes(coffee((240, 160)), PHONE, "HEIF")
    cut = client_of.post("/describe", files={"image": ("cut.heic", data[: len(data) // 2])})
    assert cut.status_code == 422, cut.text
    problem = cut.json()
    assert problem["type"].endswith("/corrupt-image")
    assert "the HEIC/HEIF image is truncated or corrupt" in problem["detail"]
    fake = client_of.post("/describe", files={"image": ("notes.heic", b"not a photo at all")})
    assert fake.status_code == 415 and fake.json()["type"].endswith("/not-an-image")
    assert "HEIC/HEIF, AVIF" in fake.json()["detail"]


def test_the_openapi_document_lists_the_phone_formats(client_of):
    doc = client_of.get("/openapi.json").json()
    body = doc["paths"]["/describe"]["post"]["requestBody"]["content"]["multipart/form-data"]
    types = body["encoding"]["image"]["contentType"].split(", ")
    assert {"image/jpeg", "image/heic", "image/heif", "image/avif"} <= set(types)
    name = body["schema"]["$ref"].rsplit("/", 1)[1]
    described = doc["components"]["schemas"][name]["properties"]["image"]["description"]
    assert "HEIC/HEIF, AVIF" in described
    served = doc["paths"]["/images/{image_id}"]["get"]["responses"]["200"]["content"]
    assert {"image/heic", "image/avif"} <= set(served)


def test_an_upload_decodes_a_phone_photo_no_larger_than_needed():
    """The upload reader: a large AVIF (no draft) is box-reduced right after decoding."""
    from groundsearch.service.http.uploads import read_photo

    big = coffee((2400, 1600))
    out = io.BytesIO()
    big.save(out, format="AVIF", quality=80, speed=10)
    img, fmt = read_photo(out.getvalue(), 40_000_000, 292)
    assert fmt == "AVIF" and img.size == (480, 320)  # 1600 // 292 = 5


@pytest.mark.parametrize(
    ("accept", "takes"),
    [
        (None, True),
        ("*/*", True),
        ("", True),
        (SAFARI, True),
        ("image/heif", True),
        ("IMAGE/HEIC;q=0.9, image/jpeg", True),
        (CHROME, False),
        (FIREFOX, False),
        ("image/jpeg", False),
        ("image/*", False),
    ],
)
def test_who_takes_a_heic(accept, takes):
    from groundsearch.service.http.routes.images import takes_heif

    assert takes_heif(accept) is takes
