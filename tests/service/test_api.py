"""The HTTP API on a real gallery of 8 Flickr8k test photos: answers and bad input."""

from __future__ import annotations

import io

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from groundsearch.service.core.relevance import ClassesKept, Judge
from groundsearch.service.core.settings import ServiceSettings
from groundsearch.service.http.app import create_app
from tests.oriented import ORIENTATIONS, oriented_bytes


@pytest.fixture(scope="module")
def client(service_components):
    with TestClient(create_app(service_components.settings, service_components)) as c:
        yield c


@pytest.fixture(scope="module")
def gallery_photo(service_components) -> tuple[int, bytes, list[str]]:
    image_id = service_components.gallery.image_ids()[0]
    path = service_components.gallery.photo_path(image_id)
    return image_id, path.read_bytes(), list(service_components.gallery.image(image_id).captions)


def png_bytes(width: int = 64, height: int = 48) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buf, format="PNG")
    return buf.getvalue()


# --- answers ---------------------------------------------------------------------------


def test_search_ranks_a_photo_first_for_its_own_caption(client, gallery_photo):
    image_id, _, captions = gallery_photo
    res = client.post("/search", params={"text": captions[0], "k": 3, "min_relevance": 0})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["query"] == captions[0] and len(body["results"]) == 3
    scores = [r["score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True)
    assert image_id in [r["id"] for r in body["results"]]
    first = body["results"][0]
    assert first["url"] == f"/images/{first['id']}" and len(first["captions"]) == 5
    assert {"parse", "encode", "search"} <= set(body["timings_ms"])


def test_describe_finds_the_captions_of_an_uploaded_gallery_photo(client, gallery_photo):
    image_id, data, captions = gallery_photo
    res = client.post(
        "/describe",
        params={"k": 5, "min_relevance": 0},
        files={"image": ("p.jpg", data, "image/jpeg")},
    )
    assert res.status_code == 200, res.text
    hits = res.json()["results"]
    assert len(hits) == 5
    assert hits[0]["image_id"] == image_id and hits[0]["text"] in captions
    assert hits[0]["image_url"] == f"/images/{image_id}"


def test_describe_answers_the_same_for_every_exif_orientation(client, gallery_photo):
    """A gallery photo stored with each of the 8 EXIF orientations (PNG, lossless):
    the same captions found, with the same scores, and the same sentences written."""
    image_id, data, _ = gallery_photo
    upright = Image.open(io.BytesIO(data)).convert("RGB")
    answers = []
    for orientation in ORIENTATIONS:
        photo = oriented_bytes(upright, orientation)
        res = client.post("/describe", params={"k": 5}, files={"image": ("p.png", photo)})
        assert res.status_code == 200, res.text
        answers.append(res.json())
    first = answers[0]
    assert first["results"][0]["image_id"] == image_id
    for orientation, answer in zip(ORIENTATIONS[1:], answers[1:], strict=True):
        assert [h["id"] for h in answer["results"]] == [h["id"] for h in first["results"]]
        for hit, want in zip(answer["results"], first["results"], strict=True):
            assert hit["score"] == pytest.approx(want["score"], abs=1e-5), orientation
        assert [g["text"] for g in answer["generated"]] == [g["text"] for g in first["generated"]]


def test_photo_and_similar(client, gallery_photo):
    image_id, data, _ = gallery_photo
    res = client.get(f"/images/{image_id}")
    assert res.status_code == 200 and res.content == data
    assert res.headers["content-type"] == "image/jpeg"
    similar = client.get(f"/images/{image_id}/similar", params={"k": 3, "min_relevance": 0})
    similar = similar.json()["results"]
    assert len(similar) == 3 and image_id not in [r["id"] for r in similar]


def test_arithmetic_moves_the_query_and_excludes_the_start(
    client, gallery_photo, service_components
):
    image_id, _, _ = gallery_photo
    plain = client.post("/arithmetic", params={"image_id": image_id, "k": 7, "min_relevance": 0})
    plain = plain.json()["results"]
    assert image_id not in [r["id"] for r in plain] and len(plain) == 7
    moved = client.post(
        "/arithmetic",
        params={
            "image_id": image_id,
            "plus": ["snow"],
            "minus": ["grass"],
            "k": 7,
            "min_relevance": 0,
        },
    )
    assert moved.status_code == 200, moved.text
    reranked = client.post(
        "/arithmetic", params={"image_id": image_id, "plus": "snow", "k": 7, "rerank": "true"}
    )
    body = reranked.json()
    assert reranked.status_code == 200 and len(body["results"] + body["weak"]) == 7
    # "+ snow" must raise the similarity to the snow query of what it returns, on average
    snow = service_components.queries.vector("snow", {})
    gallery = service_components.gallery

    def mean_snow(hits: list[dict]) -> float:
        return sum(float(gallery.image_vector(h["id"]) @ snow) for h in hits[:3]) / 3

    assert mean_snow(moved.json()["results"]) >= mean_snow(plain)


def test_arithmetic_from_an_uploaded_photo(client, gallery_photo):
    _, data, _ = gallery_photo
    res = client.post(
        "/arithmetic/upload",
        params={"plus": "dog", "k": 2, "min_relevance": 0},
        files={"image": ("p.jpg", data)},
    )
    assert res.status_code == 200 and len(res.json()["results"]) == 2


def test_explain_gives_the_tree_and_shares_that_sum_to_one(client):
    res = client.get("/explain", params={"text": "A black dog runs on the beach."})
    assert res.status_code == 200, res.text
    body = res.json()
    words = [n["word"] for n in body["nodes"]]
    assert words == ["A", "black", "dog", "runs", "on", "the", "beach", "."]
    root = next(n for n in body["nodes"] if n["head"] == 0)
    assert body["root"] == root["index"] and root["word"] == "runs" and root["size"] == 8
    assert {n["deprel"] for n in body["nodes"]} >= {"nsubj", "det", "obl:on"}
    assert sum(n["share"] for n in body["nodes"]) == pytest.approx(1.0, abs=1e-3)
    beach = next(n for n in body["nodes"] if n["word"] == "beach")
    the = next(n for n in body["nodes"] if n["word"] == "the")
    assert beach["share"] > the["share"]


def test_health_ready_metrics_and_openapi(client):
    assert client.get("/health").json() == {"status": "ok"}
    ready = client.get("/ready").json()
    assert ready["ready"] and ready["images"] == 8 and ready["captions"] == 40
    assert ready["encoder"] == "sdt-rnn" and len(ready["checkpoint"]) == 64
    client.post("/search", params={"text": "a dog"})
    text = client.get("/metrics").text
    assert 'groundsearch_request_seconds_count{method="POST",route="/search",status="200"}' in text
    for stage in ("parse", "encode", "search"):
        assert f'groundsearch_stage_seconds_count{{stage="{stage}"}}' in text
    assert 'groundsearch_gallery_items{store="images"} 8.0' in text
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/search", "/describe", "/arithmetic", "/explain", "/gallery/images"} <= set(paths)
    assert 'groundsearch_queue_depth{kind="parse"} 0.0' in text
    assert 'groundsearch_in_flight{kind="cnn"} 0.0' in text


# --- bad input -------------------------------------------------------------------------


UNUSABLE = ["", "   \t ", "\x01\x02", "!!!", "?", ".", "... ?!", "zqxv wpqk"]


def test_every_listing_route_takes_the_declared_filters_and_describes_them(client):
    """One declaration (``FILTER_PARAMS``) makes every route's filter parameters and the
    ``GET /filters`` answer the page and the client read."""
    from groundsearch.index.filters.conditions import FILTER_NAMES, FILTER_PARAMS

    specs = client.get("/filters").json()
    assert [s["name"] for s in specs] == list(FILTER_NAMES)
    assert specs[-1]["choices"] == list(FILTER_PARAMS[-1].choices) == ["folder", "upload"]
    limits = {s["name"]: (s["max_length"], s["maximum"]) for s in specs}
    assert limits["folder"] == (4096, None) and limits["camera"] == (200, None)
    assert limits["within_km"] == (None, 20_000.0) and limits["after"] == (None, None)
    paths = client.get("/openapi.json").json()["paths"]
    for path, method in [
        ("/search", "post"),
        ("/search/image", "post"),
        ("/images", "get"),
        ("/images/{image_id}/similar", "get"),
        ("/arithmetic", "post"),
        ("/arithmetic/upload", "post"),
    ]:
        names = [p["name"] for p in paths[path][method]["parameters"]]
        assert [n for n in names if n in FILTER_NAMES] == list(FILTER_NAMES), path
    near = client.post("/search", params={"text": "a dog", "near": "91,0"})
    assert near.status_code == 422 and "near" in near.text


@pytest.mark.parametrize("text", UNUSABLE)
def test_every_unusable_text_is_refused_the_same_way(client, text):
    """Empty, whitespace, control characters, punctuation or no known word: one answer."""
    answers = [
        client.post("/search", params={"text": text}),
        client.get("/explain", params={"text": text}),
    ]
    for res in answers:
        assert res.status_code == 404, res.text
        assert res.headers["content-type"] == "application/problem+json"
        body = res.json()
        assert body["type"] == "/problems/unusable-text"
        assert body["detail"].startswith("text has no word the model knows")
    reference = client.post("/search", params={"text": "zqxv wpqk"}).json()["detail"]
    assert answers[0].json()["detail"] == reference


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"text": "dog " * 200}, "limit"),
        ({"text": "a dog", "k": 0}, "greater than or equal to 1"),
        ({"text": "a dog", "k": 101}, "k must be"),
        ({"text": "a dog", "k": "many"}, "integer"),
        ({}, "text"),
    ],
)
def test_bad_search_length_or_k_is_a_422_problem(client, params, needle):
    res = client.post("/search", params=params)
    assert res.status_code == 422, res.text
    assert res.headers["content-type"] == "application/problem+json"
    body = res.json()
    assert set(body) >= {"type", "title", "status", "detail", "instance"} and needle in res.text
    assert body["status"] == 422 and body["instance"] == "/search"


def test_unknown_routes_and_methods_are_problems(client):
    res = client.put("/search")
    assert res.status_code == 405 and res.headers["allow"] == "POST"
    assert res.json()["type"] == "/problems/method-not-allowed"
    res = client.get("/no-such-route")
    assert res.status_code == 404 and res.json()["type"] == "/problems/not-found"


def test_the_schema_states_the_limits_errors_and_security(client, service_components):
    doc = client.get("/openapi.json").json()
    settings = service_components.settings
    search = doc["paths"]["/search"]["post"]
    params = {p["name"]: p["schema"] for p in search["parameters"]}
    assert params["k"]["maximum"] == settings.max_k and params["k"]["minimum"] == 1
    assert params["text"]["maxLength"] == settings.max_text_chars
    assert set(search["responses"]) == {"200", "404", "422", "429", "503"}
    problem = search["responses"]["422"]["content"]["application/problem+json"]["schema"]
    assert problem == {"$ref": "#/components/schemas/Problem"}
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    add = doc["paths"]["/gallery/images"]["post"]
    assert add["security"] == [{"writeToken": []}]
    assert doc["components"]["securitySchemes"]["writeToken"]["scheme"] == "bearer"
    assert {"401", "403", "413", "415"} <= set(add["responses"])
    form = add["requestBody"]["content"]["multipart/form-data"]
    assert "image/jpeg" in form["encoding"]["image"]["contentType"]
    body = doc["components"]["schemas"][form["schema"]["$ref"].rsplit("/", 1)[1]]
    assert body["properties"]["captions"]["maxItems"] == settings.max_captions
    assert "Retry-After" in add["responses"]["429"]["headers"]


def test_a_non_image_upload_is_415(client):
    res = client.post("/describe", files={"image": ("a.jpg", b"hello, not a photo", "image/jpeg")})
    assert res.status_code == 415 and "not an image" in res.json()["detail"]


def test_a_truncated_upload_is_422(client, gallery_photo):
    _, data, _ = gallery_photo
    res = client.post("/describe", files={"image": ("cut.jpg", data[: len(data) // 2])})
    assert res.status_code == 422 and "truncated" in res.json()["detail"]


def test_an_empty_upload_is_422(client):
    res = client.post("/describe", files={"image": ("empty.jpg", b"")})
    assert res.status_code == 422


def test_a_decompression_bomb_is_413(client):
    buf = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(buf, format="PNG")  # 100 MP in a few kB
    assert len(buf.getvalue()) < 100_000
    res = client.post("/describe", files={"image": ("bomb.png", buf.getvalue())})
    detail = res.json()["detail"]
    assert res.status_code == 413 and "pixel limit" in detail
    assert "bomb" not in detail and "DOS" not in detail  # our words, not Pillow's


def test_an_upload_over_the_byte_limit_is_413(service_components):
    settings = service_components.settings.model_copy(update={"max_upload_bytes": 1000})
    with TestClient(create_app(settings, service_components)) as small:
        body = png_bytes(400, 400) + b"\0" * 2000
        res = small.post("/describe", files={"image": ("big.png", body)})
        assert res.status_code == 413 and "limit" in res.json()["detail"]
        # declared too large: refused before the body is read
        res = small.post(
            "/describe", content=b"x" * 80_000, headers={"content-type": "multipart/form-data"}
        )
        assert res.status_code == 413


def test_missing_upload_and_bad_arithmetic(client, gallery_photo):
    image_id, _, _ = gallery_photo
    assert client.post("/describe").status_code == 422
    assert client.post("/arithmetic/upload").status_code == 422
    assert client.post("/arithmetic", params={"plus": "red"}).status_code == 422
    unknown_phrase = client.post("/arithmetic", params={"image_id": image_id, "plus": "zqxv"})
    assert unknown_phrase.status_code == 404
    assert unknown_phrase.json()["detail"].startswith("plus phrase 1 has no word the model knows")
    many = client.post("/arithmetic", params={"image_id": image_id, "plus": ["red"] * 11})
    assert many.status_code == 422


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/images/999"),
        ("get", "/images/999/similar"),
        ("post", "/arithmetic?image_id=999"),
    ],
)
def test_unknown_image_ids_are_404(client, method, url):
    res = getattr(client, method)(url)
    assert res.status_code == 404 and "999" in res.json()["detail"]


def test_a_non_numeric_id_is_422(client):
    assert client.get("/images/abc").status_code == 422


def test_the_service_is_503_until_loaded_and_says_why(tmp_path):
    settings = ServiceSettings(index_dir=tmp_path / "nothing-here")
    with TestClient(create_app(settings)) as c:
        assert c.get("/health").status_code == 200
        for _ in range(200):  # the load runs in a thread and fails quickly
            res = c.get("/ready")
            if "no gallery" in res.text:
                break
            import time

            time.sleep(0.05)
        assert res.status_code == 503 and "no gallery" in res.json()["detail"]
        assert c.post("/search", params={"text": "a dog"}).status_code == 503


def test_a_short_write_token_is_refused():
    with pytest.raises(ValueError, match="at least 16"):
        ServiceSettings(write_token="secret")


def test_concurrent_first_queries_get_one_ensemble(parser):
    """Threads that embed at once on a freshly loaded ensemble all get its real size."""
    from concurrent.futures import ThreadPoolExecutor

    from groundsearch.common.settings import get_settings
    from groundsearch.model.runtime.checkpoints import load_checkpoint

    model = load_checkpoint(get_settings().default_checkpoint, parser=parser.version)
    trees = parser.parse(["A dog runs .", "Two children play in the snow ."])
    with ThreadPoolExecutor(8) as pool:
        shapes = set(pool.map(lambda i: model.embed_sentences(trees[i % 2 :]).shape[1], range(16)))
    # the members' joint vectors, and the concept channel's 50 columns after them
    assert shapes == {len(model.model.members()) * model.model.config.hidden + 50}


def test_the_api_docs_load_nothing_from_outside(client):
    page = "/docs"
    import re

    html = client.get(page).text
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    assert assets and all(a.startswith("/docs-static/") for a in assets), assets
    for asset in assets:
        assert client.get(asset).status_code == 200
    assert "/openapi.json" in html


# --- relevance ---------------------------------------------------------------------------


def test_every_hit_carries_its_relevance_and_the_default_splits_them(client, gallery_photo):
    image_id, data, _ = gallery_photo
    answers = [
        client.post("/search", params={"text": "a dog runs", "k": 8}),
        client.get(f"/images/{image_id}/similar", params={"k": 5}),
        client.post("/arithmetic", params={"image_id": image_id, "plus": ["snow"], "k": 5}),
        client.post("/describe", params={"k": 5}, files={"image": ("p.jpg", data, "image/jpeg")}),
    ]
    ready = client.get("/ready").json()
    assert ready["relevance"].startswith("relevance.json")
    assert ready["hubness"].startswith("hubness.npz (photos: k ")  # fitted with relevance
    for res in answers:
        assert res.status_code == 200, res.text
        body = res.json()
        threshold = body["min_relevance"]
        assert 0 < threshold < 1
        hits = body["results"] + body["weak"]
        assert hits and all(0 <= h["relevance"] <= 1 for h in hits)
        assert all(h["relevance"] >= threshold for h in body["results"])
        assert all(h["relevance"] < threshold for h in body["weak"])
        assert body["no_match"] == (not body["results"])


def test_min_relevance_moves_hits_without_changing_the_ranking(client):
    everything = client.post("/search", params={"text": "a dog runs", "k": 8, "min_relevance": 0})
    nothing = client.post("/search", params={"text": "a dog runs", "k": 8, "min_relevance": 1})
    a, b = everything.json(), nothing.json()
    assert a["weak"] == [] and not a["no_match"] and len(a["results"]) == 8
    # relevance 1 is never reached here: every hit is weak, in the same order and scores
    assert b["results"] == [] and b["no_match"] and b["weak"] == a["results"]


def test_a_caption_finds_its_own_photo_in_results_on_the_small_gallery(client, gallery_photo):
    # 8 photos, fewer than the 20 scores the full relevance models read: the score-only
    # model scores them (a caption against its own photo came out 0.04 before)
    image_id, _, captions = gallery_photo
    body = client.post("/search", params={"text": captions[0], "k": 5}).json()
    assert not body["no_match"]
    assert image_id in [r["id"] for r in body["results"]]


def test_a_query_with_no_match_in_the_gallery_says_so(client):
    for text in ("a giraffe", "a laptop"):
        res = client.post("/search", params={"text": text, "k": 5})
        assert res.status_code == 200, res.text
        body = res.json()
        assert body["no_match"] is True and body["results"] == []
        assert len(body["weak"]) == 5  # the guesses, apart


@pytest.mark.parametrize("value", ["-0.1", "1.5", "abc", "nan"])
def test_a_bad_min_relevance_is_a_422_problem(client, value, gallery_photo):
    image_id, _, _ = gallery_photo
    for res in (
        client.post("/search", params={"text": "a dog", "min_relevance": value}),
        client.get(f"/images/{image_id}/similar", params={"min_relevance": value}),
        client.post("/arithmetic", params={"image_id": image_id, "min_relevance": value}),
    ):
        assert res.status_code == 422, res.text
        assert res.headers["content-type"].startswith("application/problem+json")
        assert "min_relevance" in res.text


def test_a_query_with_a_tagged_noun_is_judged_with_each_photos_evidence(service_components):
    """The vector tagger reads the gallery's stored vectors and the classifier's stored
    classes: for "a dog", the photos whose captions name a dog get more evidence than the
    others, and the judge passes it (a query whose nouns neither names, "an okapi",
    has none)."""
    judge, gallery = service_components.judge, service_components.gallery
    assert judge.tagger is not None and judge.tagger.backbone.startswith("vectors:")
    assert judge.nouns is not None and gallery.stores_classes()
    nouns = judge.named((("dog", "dog"),))
    assert nouns == ["dog"] and judge.named((("okapi", "okapi"),)) == []
    ids = gallery.image_ids()
    dog = np.array(["dog" in " ".join(c.text for c in gallery.captions_of(i)).lower() for i in ids])
    assert dog.any() and not dog.all()
    evidence = judge.evidence(nouns, ids)
    assert evidence is not None and evidence[dog].min() > evidence[~dog].max()
    assert judge.evidence([], ids) is None


def test_a_noun_only_the_classifier_names_is_judged_by_the_stored_classes(service_components):
    """ "an armadillo" (no tagger noun of either collection, an ImageNet class) reads each
    photo's stored classes: none of the 8 photos shows one, so its evidence is near 0
    everywhere; a photo without stored classes (indexed before they were kept) reads NaN
    and is judged without evidence."""
    judge, gallery = service_components.judge, service_components.gallery
    nouns = judge.named((("armadillo", "armadillo"),))
    assert nouns == ["armadillo"]
    ids = gallery.image_ids()
    evidence = judge.evidence(nouns, ids)
    assert evidence is not None and np.all(evidence < 0.05)

    def but_the_first(wanted):
        class_ids, probs = gallery.image_classes(wanted)
        first = (np.asarray(wanted) == ids[0])[:, None]
        return np.where(first, -1, class_ids), np.where(first, 0.0, probs)

    judged = Judge(judge.model, judge.channel_columns, judge.tagger, judge.products, judge.nouns,
                   but_the_first, judge.stores_classes)  # fmt: skip
    partial = judged.evidence(nouns, ids)
    assert partial is not None and np.isnan(partial[0]) and not np.isnan(partial[1:]).any()
    scores = np.linspace(0.6, 0.3, len(ids))
    plain = judge.relevance("text-image", scores, None, "an armadillo")
    mixed = judge.relevance("text-image", scores, None, "an armadillo", partial)
    known = judge.relevance("text-image", scores, None, "an armadillo", np.nan_to_num(partial))
    assert plain is not None and mixed is not None and known is not None
    assert mixed[0] == plain[0] and np.array_equal(mixed[1:], known[1:])
    with_evidence = judge.relevance("text-image", scores, None, "a dog", evidence)
    assert not np.array_equal(with_evidence, judge.relevance("text-image", scores, None, "a dog"))


def test_whether_every_photo_has_classes_is_asked_again_until_it_has():
    """A gallery still lacking some photos' classes is asked again after ``every``
    seconds; once every photo has them the answer stays (new photos come with theirs)."""
    answers = iter([False, True])
    asked = []

    def check() -> bool:
        asked.append(1)
        return next(answers)

    kept = ClassesKept(check, every=0.0)
    assert kept() is False and kept() is True and kept() is True
    assert len(asked) == 2
    slow = ClassesKept(lambda: asked.append(1) or False, every=3600.0)
    assert slow() is False and slow() is False and len(asked) == 3  # not asked again yet
