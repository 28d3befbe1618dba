"""``groundsearch.client`` against a real ``groundsearch serve --sample`` (a subprocess,
the shipped 15-photo sample gallery, a write token): every route, typed answers, the
problem document of errors, pages without repeats, and the README's example run as
written. The dataclasses are checked against the service's response models."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import httpx
import pytest
from PIL import Image

from groundsearch.client import (
    AddedPhoto,
    CaptionHit,
    Client,
    Concept,
    DescribeResponse,
    ExplainResponse,
    GalleryPhoto,
    GroundsearchError,
    Health,
    ImageHit,
    ImagesResponse,
    LibraryResponse,
    ParaphraseResponse,
    Place,
    Readiness,
    RemovedPhoto,
    SearchResponse,
    TreeNode,
    WrittenSentence,
)
from tests.exif_photos import Exif, photo_bytes
from tests.service.real_server import Server, free_port, server_env

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "client-test-write-token-0123456789"
SAMPLE_PHOTOS = 15


# --- without a server -----------------------------------------------------------------------


def test_the_dataclasses_mirror_the_service_response_models():
    from groundsearch.service.http import schemas
    from groundsearch.service.http.problems import FieldError as ServiceFieldError

    pairs = [
        (Place, schemas.Place),
        (ImageHit, schemas.ImageHit),
        (CaptionHit, schemas.CaptionHit),
        (WrittenSentence, schemas.WrittenSentence),
        (Concept, schemas.Concept),
        (SearchResponse, schemas.SearchResponse),
        (ImagesResponse, schemas.ImagesResponse),
        (DescribeResponse, schemas.DescribeResponse),
        (ParaphraseResponse, schemas.ParaphraseResponse),
        (TreeNode, schemas.TreeNode),
        (ExplainResponse, schemas.ExplainResponse),
        (AddedPhoto, schemas.AddedPhoto),
        (RemovedPhoto, schemas.RemovedPhoto),
        (Health, schemas.Health),
        (Readiness, schemas.Readiness),
        (GalleryPhoto, schemas.GalleryPhoto),
        (LibraryResponse, schemas.LibraryResponse),
    ]
    from groundsearch.client import FieldError

    pairs.append((FieldError, ServiceFieldError))
    for mine, theirs in pairs:
        fields = {f.name: f for f in dataclasses.fields(mine)}
        assert set(fields) == set(theirs.model_fields), mine.__name__
        for name, spec in theirs.model_fields.items():
            # a field the server may leave out has a default here too
            if not spec.is_required():
                assert fields[name].default is not dataclasses.MISSING or (
                    fields[name].default_factory is not dataclasses.MISSING
                ), f"{mine.__name__}.{name}"


def test_an_error_answer_that_is_not_a_problem_document_still_raises_one_error():
    html = httpx.Response(502, text="<html>Bad gateway</html>", headers={"Retry-After": "3"})
    error = GroundsearchError.of(html)
    assert (error.status, error.type, error.title) == (502, "about:blank", "Bad Gateway")
    assert "Bad gateway" in error.detail and error.retry_after == 3.0 and error.problem == {}
    problem = {
        "type": "/problems/invalid-request",
        "title": "Invalid request",
        "status": 422,
        "detail": "invalid request: k: too big",
        "instance": "/search",
        "errors": [{"loc": ["query", "k"], "msg": "too big", "type": "less_than_equal"}],
    }
    error = GroundsearchError.of(httpx.Response(422, json=problem))
    assert error.problem == problem and error.parameters == ["k"]
    assert error.errors[0].loc == ["query", "k"] and error.instance == "/search"


# --- a real server --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """``groundsearch serve --sample`` with a write token: the sample gallery is built on
    its first start, as a new user's first ``serve`` builds it."""
    root = tmp_path_factory.mktemp("client-server")
    (root / "cache").mkdir()
    env = server_env(root / "cache", TOKEN)
    served = Server(root / "gallery", env, root / "server.log", extra=["--sample"])
    served.start()
    try:
        served.ready()
        yield served
    finally:
        served.kill()
    assert "Traceback" not in served.tail()


@pytest.fixture
def gs(server: Server):
    with Client(server.base, token=TOKEN) as client:
        yield client


def hits(page: SearchResponse | ImagesResponse) -> list[ImageHit]:
    return page.results + page.weak


@pytest.mark.slow
def test_every_read_route_answers_typed_results(gs: Client):
    assert gs.health() == Health(status="ok")
    ready = gs.ready()
    assert ready.ready and ready.images == SAMPLE_PHOTOS and ready.read_only is False
    page = gs.search("a man with a camera", k=3)
    assert isinstance(page, SearchResponse) and page.query == "a man with a camera"
    assert len(hits(page)) == 3 and page.min_relevance is not None
    camera = hits(page)[0]
    assert camera.file == "camera.png" and camera.source == "folder"
    assert camera.path == str(Path(camera.folder or "") / "camera.png")
    assert Path(camera.path).is_file()  # the server's disk is this one
    assert camera.taken_source == "file" and camera.width and camera.height

    photo = gs.photo(camera.id)
    assert photo == Path(camera.path).read_bytes()
    said = gs.describe(photo, k=3)
    assert said.generated and isinstance(said.generated[0], WrittenSentence)
    assert len(said.results + said.weak) == 3
    assert all(isinstance(c, CaptionHit) and c.source == "gallery" for c in said.results)
    retrieved = gs.describe(photo, k=2, sentences="retrieved", min_relevance=0)
    assert retrieved.generated == [] and len(retrieved.results) == 2

    like = gs.search_image(photo, k=2, min_relevance=0)
    assert like.results[0].id == camera.id and like.query == ""
    steered = gs.search_image(io.BytesIO(photo), text="at night", k=2, min_relevance=0)
    assert steered.query == "at night" and len(steered.results) == 2

    similar = gs.similar(camera.id, k=3, min_relevance=0)
    assert isinstance(similar, ImagesResponse) and len(similar.results) == 3
    assert camera.id not in {h.id for h in similar.results} and similar.next is not None

    moved = gs.arithmetic(camera.id, minus=["man"], plus="dog", k=2, sentence=True)
    assert len(hits(moved)) == 2 and moved.generated
    uploaded = gs.arithmetic_upload(photo, plus=["snow"], k=2, min_relevance=0)
    assert len(uploaded.results) == 2

    tree = gs.explain("a man with a camera")
    assert isinstance(tree, ExplainResponse) and [n.word for n in tree.nodes][:2] == ["a", "man"]
    assert abs(sum(n.share or 0 for n in tree.nodes) - 1) < 1e-3
    assert gs.paraphrase("a dog runs on the beach").generated


@pytest.mark.slow
def test_gallery_writes_with_the_token_and_the_filters_on_their_metadata(
    gs: Client, server: Server, tmp_path: Path
):
    source = Image.open(io.BytesIO(gs.photo(1))).convert("RGB")
    dated = []
    for i, (day, lat) in enumerate([("2021:05:01", 48.8583), ("2023:08:15", 59.9139)]):
        tags = Exif(original=f"{day} 10:00:00", offset="+02:00", make="Apple", model="iPhone 12")
        tags = dataclasses.replace(tags, lat=lat, lon=2.2945 if i == 0 else 10.7522)
        data = photo_bytes(source.rotate(90 * (i + 1), expand=True), tags)
        added = gs.add_photo(data, captions=[f"A photo taken on day {i} ."], filename=f"d{i}.jpg")
        assert isinstance(added, AddedPhoto) and added.new and len(added.captions) == 1
        assert gs.add_photo(data).new is False  # the same bytes: stored once
        dated.append(added.id)
    try:
        mine = gs.search("a photo", k=10, source="upload", min_relevance=0)
        assert {h.id for h in mine.results} == set(dated) and mine.total == 2
        hit = next(h for h in mine.results if h.id == dated[0])
        assert hit.camera == "Apple iPhone 12" and hit.taken == "2021-05-01T10:00:00+02:00"
        assert hit.place is not None and abs(hit.place.lat - 48.8583) < 1e-3
        assert hit.folder is None and hit.path is None and hit.source == "upload"
        # the sample's photos are dated by their files' times: today
        later = gs.search("a photo", after="2022-01-01", before="2025-01-01", min_relevance=0)
        assert [h.id for h in later.results] == [dated[1]]
        from datetime import date

        earlier = gs.search("a photo", before=date(2022, 1, 1), source="upload", min_relevance=0)
        assert [h.id for h in earlier.results] == [dated[0]]
        paris = gs.search("a photo", near=(48.8584, 2.2945), within_km=5, min_relevance=0)
        assert [h.id for h in paris.results] == [dated[0]]
        newest = gs.search("a photo", camera="apple IPHONE 12", order="-date", min_relevance=0)
        assert [h.id for h in newest.results] == dated[::-1] and newest.order == "-date"
        similar = gs.similar(dated[0], source="upload", min_relevance=0)
        assert [h.id for h in similar.results] == [dated[1]]
    finally:
        removed = [gs.remove_photo(i) for i in dated]
    assert all(isinstance(r, RemovedPhoto) and r.removed_captions == 1 for r in removed)
    assert gs.search("a photo", source="upload", min_relevance=0).results == []

    with Client(server.base) as anonymous, pytest.raises(GroundsearchError) as no_token:
        anonymous.remove_photo(1)
    assert no_token.value.status == 401 and no_token.value.type == "/problems/unauthorized"
    with Client(server.base, token="x" * 32) as wrong, pytest.raises(GroundsearchError) as bad:
        wrong.add_photo(b"not read: refused before")
    assert bad.value.status == 403 and bad.value.problem["instance"] == "/gallery/images"
    assert gs.ready().images == SAMPLE_PHOTOS


@pytest.mark.slow
def test_errors_carry_the_problem_document(gs: Client, server: Server):
    with pytest.raises(GroundsearchError) as invalid:
        gs.search("a dog", within_km=5)
    e = invalid.value
    assert (e.status, e.type, e.title) == (422, "/problems/invalid-request", "Invalid request")
    assert e.parameters == ["within_km"] and e.errors[0].loc == ["query", "within_km"]
    assert e.problem["status"] == 422 and e.problem["errors"][0]["msg"] == e.errors[0].msg
    assert "within_km" in e.detail and e.instance == "/search"

    # the filters are the server's (GET /filters): a keyword naming none is not ignored
    assert [spec["name"] for spec in gs.filters()][:2] == ["after", "before"]
    with pytest.raises(TypeError, match="unknown filter taken_on"):
        gs.search("a dog", taken_on="2024-06-01")

    with pytest.raises(GroundsearchError) as unusable:
        gs.search("!!!")
    assert unusable.value.status == 404 and unusable.value.type == "/problems/unusable-text"
    assert "no word the model knows" in unusable.value.detail
    with pytest.raises(GroundsearchError) as unknown:
        gs.similar(10**9)
    assert unknown.value.status == 404 and unknown.value.type == "/problems/unknown-image"
    with pytest.raises(GroundsearchError) as not_a_photo:
        gs.describe(b"plain text, not a photo", filename="notes.txt")
    assert not_a_photo.value.status == 415
    with pytest.raises(GroundsearchError) as other_cursor:
        first = gs.search("a man with a camera", k=2)
        gs.search("a rocket", k=2, cursor=first.next)
    assert other_cursor.value.status == 422 and "cursor" in other_cursor.value.detail

    with (
        Client(f"http://127.0.0.1:{free_port()}") as nobody,
        pytest.raises(GroundsearchError) as unreachable,
    ):
        nobody.health()
    assert unreachable.value.status is None and unreachable.value.type == "unreachable"


@pytest.mark.slow
@pytest.mark.parametrize("order", ["relevance", "date", "-date"])
def test_pages_are_read_to_the_end_without_repeats(gs: Client, order: str):
    everything = gs.search("a photo", k=100, order=order, min_relevance=0)
    assert everything.next is None and len(everything.results) == SAMPLE_PHOTOS
    pages = list(gs.search_pages("a photo", k=4, order=order, min_relevance=0))
    assert len(pages) == 4 and pages[-1].next is None
    assert all(p.total == SAMPLE_PHOTOS for p in pages)
    ids = [h.id for p in pages for h in p.results]
    assert ids == [h.id for h in everything.results]  # the same order, each once

    photo = gs.photo(ids[0])
    like = [h.id for p in gs.search_image_pages(photo, k=6, min_relevance=0) for h in p.results]
    assert sorted(like) == sorted(ids)
    near = [h.id for p in gs.similar_pages(ids[0], k=5, min_relevance=0) for h in p.results]
    assert sorted(near) == sorted(set(ids) - {ids[0]})
    with pytest.raises(TypeError):
        gs.search_pages("a photo", cursor="abc")


def test_the_library_listing_thumbnails_and_describe_by_id(gs: Client):
    pages = list(gs.library_pages(k=4))
    photos = [p for page in pages for p in page.results]
    assert len(photos) == pages[0].total == SAMPLE_PHOTOS
    assert len({p.id for p in photos}) == SAMPLE_PHOTOS and pages[-1].next is None
    assert all(isinstance(p, GalleryPhoto) and p.thumbnail.endswith("/thumbnail") for p in photos)
    small = gs.thumbnail(photos[0].id, size=64)
    assert small[:2] == b"\xff\xd8" and len(small) < len(gs.photo(photos[0].id))
    told = gs.describe_photo(photos[0].id, sentences="retrieved", k=2)
    assert isinstance(told, DescribeResponse) and told.generated == []
    with pytest.raises(GroundsearchError) as caught:
        gs.library(near="91,0")
    assert caught.value.status == 422 and caught.value.parameters == ["near"]


def readme_example() -> str:
    """The README's client example: the python block of "From Python"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### From Python: `groundsearch.client`") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "no python block in the README's client section"
    return match.group(1)


@pytest.mark.slow
def test_the_readme_example_runs_as_written(server: Server):
    env = {**os.environ, "GROUNDSEARCH_URL": server.base, "GROUNDSEARCH_WRITE_TOKEN": TOKEN}
    run = subprocess.run(
        [sys.executable, "-c", readme_example()],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == f"{SAMPLE_PHOTOS} photos" and "camera.png" in lines[1]
    assert "422 /problems/invalid-request ['within_km']" in run.stdout
    with Client(server.base) as gs:
        assert gs.ready().images == SAMPLE_PHOTOS  # its upload was removed again


@pytest.mark.slow
def test_the_client_imports_nothing_of_the_service_model_or_index():
    code = "import sys, groundsearch.client; print('\\n'.join(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    loaded = set(run.stdout.split())
    assert run.returncode == 0 and "httpx" in loaded
    heavy = {"torch", "numpy", "faiss", "fastapi", "pydantic", "PIL", "stanza"}
    assert not heavy & loaded
    assert not {m for m in loaded if m.startswith(("groundsearch.", "groundsearch_"))} - {
        "groundsearch.client"
    }


def test_the_client_module_is_typed_without_the_project():
    """Its annotations resolve with the standard library and httpx alone."""
    for cls in (SearchResponse, ImagesResponse, DescribeResponse, Readiness, ImageHit):
        typing.get_type_hints(cls)
