"""Gallery writes over HTTP: the token, persistence, and bad input that changes nothing."""

from __future__ import annotations

import io
import shutil
import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from groundsearch.index.gallery import CaptionRecord, Gallery
from groundsearch.index.store.records import objects_of
from groundsearch.model.runtime.checkpoints import checkpoint_identity
from groundsearch.model.runtime.objects.detector import COCO
from groundsearch.service.core.components import Components
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.core.work_threads import PHOTO_PREFIX as PHOTO_THREADS
from groundsearch.service.http import uploads
from groundsearch.service.http.app import create_app
from tests.oriented import ORIENTATIONS, coffee, oriented_bytes

TOKEN = "a-long-enough-write-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CAPTIONS = ["A red balloon floats over a green field .", "A balloon in the sky ."]


@pytest.fixture(scope="module")
def writable(service_gallery, parser, tmp_path_factory):
    index = tmp_path_factory.mktemp("writes") / "gallery"
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
def gallery_photo(service_components) -> bytes:
    """The bytes of a photo the gallery holds."""
    gallery = service_components.gallery
    return gallery.photo_path(gallery.image_ids()[-1]).read_bytes()


@pytest.fixture(scope="module")
def photo(gallery_photo) -> bytes:
    """A photo the gallery does not hold yet (a gallery photo, re-encoded)."""
    buf = io.BytesIO()
    Image.open(io.BytesIO(gallery_photo)).save(buf, format="JPEG", quality=80)
    return buf.getvalue()


def disk_counts(components: Components, index) -> tuple[int, int]:
    """The counts a fresh open of the gallery folder sees (what survives a restart)."""
    g = Gallery.open(index, checkpoint_identity(components.settings.checkpoint_path))
    try:
        return g.counts()["images"], g.counts()["captions"]
    finally:
        g.close(snapshot=False)


def add_photo(client: TestClient, name: str, photo: bytes, captions: list[str]) -> dict:
    """Add a photo with its captions (with the token): the 201 answer's body."""
    res = client.post(
        "/gallery/images",
        files={"image": (name, photo, "image/jpeg")},
        data={"captions": captions},
        headers=AUTH,
    )
    assert res.status_code == 201, res.text
    return res.json()


def test_writes_need_the_token(writable, photo):
    client, _, _ = writable
    files = {"image": ("p.jpg", photo)}
    assert client.post("/gallery/images", files=files).status_code == 401
    wrong = {"Authorization": "Bearer not-the-token-at-all"}
    assert client.post("/gallery/images", files=files, headers=wrong).status_code == 403
    assert client.delete("/gallery/images/0").status_code == 401
    assert client.delete("/gallery/images/0", headers=wrong).status_code == 403
    basic = {"Authorization": f"Basic {TOKEN}"}
    assert client.delete("/gallery/images/0", headers=basic).status_code == 401


def test_writes_are_forbidden_without_a_configured_token(service_components, photo):
    with TestClient(create_app(service_components.settings, service_components)) as client:
        res = client.post("/gallery/images", files={"image": ("p.jpg", photo)}, headers=AUTH)
        assert res.status_code == 403 and "disabled" in res.json()["detail"]


def test_add_search_serve_and_remove_a_photo(writable, photo):
    client, components, index = writable
    before = disk_counts(components, index)
    added = add_photo(client, "mine.jpg", photo, CAPTIONS)
    assert len(added["captions"]) == 2
    assert disk_counts(components, index) == (before[0] + 1, before[1] + 2)  # persisted at once
    served = client.get(added["url"])
    assert served.status_code == 200 and served.content == photo
    hits = client.post("/search", params={"text": CAPTIONS[0], "k": 9, "min_relevance": 0}).json()[
        "results"
    ]
    mine = next(h for h in hits if h["id"] == added["id"])
    assert mine["source"] == "upload" and mine["captions"] == CAPTIONS
    assert added["new"] is True
    if components.detector is not None:  # installed (make install): its scores stored too
        stored = objects_of(components.gallery.records.reader(), [added["id"]], len(COCO))
        assert np.isfinite(stored).all() and stored.max() > 0
    assert components.gallery.captions_of(added["id"]) == [
        CaptionRecord(cid, text, added["id"])
        for cid, text in zip(added["captions"], CAPTIONS, strict=True)
    ]

    res = client.delete(f"/gallery/images/{added['id']}", headers=AUTH)
    assert res.status_code == 200 and res.json() == {"id": added["id"], "removed_captions": 2}
    assert disk_counts(components, index) == before
    assert client.get(added["url"]).status_code == 404
    assert client.delete(f"/gallery/images/{added['id']}", headers=AUTH).status_code == 404


def test_a_photo_in_any_exif_orientation_is_embedded_and_served_upright(writable):
    """The same real photo uploaded with each of the 8 EXIF orientations (PNG: the
    upright pixels are identical): one vector, and served upright."""
    client, components, _ = writable
    upright = coffee()
    sent = {o: oriented_bytes(upright, o) for o in ORIENTATIONS}
    added = {
        o: add_photo(client, f"o{o}.png", data, ["A cup of coffee on a saucer ."])
        for o, data in sent.items()
    }
    try:
        first = components.gallery.image_vector(added[1]["id"])
        for o in ORIENTATIONS[1:]:
            vector = components.gallery.image_vector(added[o]["id"])
            np.testing.assert_allclose(vector, first, rtol=0, atol=1e-6, err_msg=f"o{o}")
        plain = client.get(added[1]["url"])  # upright already: the file itself
        assert plain.status_code == 200 and plain.content == sent[1]
        for o in ORIENTATIONS[1:]:
            served = client.get(added[o]["url"])
            assert served.status_code == 200, served.text
            assert served.headers["content-type"] == "image/png"
            assert served.headers["cache-control"] == "max-age=3600"
            assert served.headers["etag"] != plain.headers["etag"]
            assert "last-modified" in served.headers
            with Image.open(io.BytesIO(served.content)) as img:  # no EXIF applied here
                assert img.format == "PNG" and img.getexif().get(0x0112) is None
                assert np.array_equal(np.asarray(img.convert("RGB")), np.asarray(upright))
        doc = client.get("/openapi.json").json()["paths"]["/images/{image_id}"]["get"]
        assert "upright" in doc["responses"]["200"]["description"]
    finally:
        for answer in added.values():
            client.delete(f"/gallery/images/{answer['id']}", headers=AUTH)


def test_a_turned_jpeg_is_served_upright_as_a_jpeg(writable):
    client, _, _ = writable
    upright = coffee()
    added = add_photo(client, "phone.jpg", oriented_bytes(upright, 6, "JPEG"), [])
    try:
        served = client.get(added["url"])
        assert served.status_code == 200 and served.headers["content-type"] == "image/jpeg"
        with Image.open(io.BytesIO(served.content)) as img:
            assert img.format == "JPEG" and img.size == upright.size
            assert img.getexif().get(0x0112) is None
            diff = np.abs(np.asarray(img, np.int16) - np.asarray(upright, np.int16)).mean()
            assert diff < 4, diff  # stored at quality 95, served at quality 95
    finally:
        client.delete(f"/gallery/images/{added['id']}", headers=AUTH)


def test_a_photo_already_in_the_gallery_is_stored_once(writable, gallery_photo):
    client, components, index = writable
    before = disk_counts(components, index)
    added = add_photo(client, "again.jpg", gallery_photo, ["A photo we had already ."])
    assert added["new"] is False and len(added["captions"]) == 1
    assert disk_counts(components, index) == (before[0], before[1] + 1)
    assert not (index / "uploads").exists() or not list((index / "uploads").iterdir())
    hits = client.post(
        "/search", params={"text": "A photo we had already .", "k": 9, "min_relevance": 0}
    ).json()
    assert len({h["id"] for h in hits["results"]}) == len(hits["results"])


@pytest.mark.parametrize(
    ("files", "data", "status"),
    [
        ({"image": ("a.jpg", b"not a photo")}, {}, 415),
        ("truncated", {}, 422),
        ("photo", {"captions": ["zqxv wpqk"]}, 404),
        ("photo", {"captions": ["A dog .", "!!!"]}, 404),
        ("photo", {"captions": ["x" * 3000]}, 422),
        ("photo", {"captions": ["A dog ."] * 21}, 422),
    ],
)
def test_a_bad_write_changes_nothing(writable, photo, files, data, status):
    client, components, index = writable
    before = disk_counts(components, index), components.gallery.counts()
    uploads = sorted((index / "uploads").glob("*")) if (index / "uploads").exists() else []
    if files == "photo":
        files = {"image": ("p.jpg", photo)}
    elif files == "truncated":
        files = {"image": ("p.jpg", photo[: len(photo) // 3])}
    res = client.post("/gallery/images", files=files, data=data, headers=AUTH)
    assert res.status_code == status, res.text
    assert (disk_counts(components, index), components.gallery.counts()) == before
    now = sorted((index / "uploads").glob("*")) if (index / "uploads").exists() else []
    assert now == uploads


def test_an_upload_is_decoded_and_embedded_on_the_photo_workers(writable, photo, monkeypatch):
    """The upload's decode and backbone run on the niced photo workers' threads, as
    /describe's do, not on the default thread pool."""
    client, components, _ = writable
    threads: dict[str, list[str]] = {"decode": [], "cnn": []}
    decode, embed = uploads.decode_photo, components.photos.extractor.embed_images

    def recorded(kind, fn):
        def call(*args, **kwargs):
            threads[kind].append(threading.current_thread().name)
            return fn(*args, **kwargs)

        return call

    monkeypatch.setattr(uploads, "decode_photo", recorded("decode", decode))
    monkeypatch.setattr(components.photos.extractor, "embed_images", recorded("cnn", embed))
    added = add_photo(client, "workers.jpg", photo, ["A dog ."])
    assert client.delete(f"/gallery/images/{added['id']}", headers=AUTH).status_code == 200
    assert threads["decode"] and threads["cnn"]
    names = threads["decode"] + threads["cnn"]
    assert all(name.startswith(PHOTO_THREADS) for name in names), threads
