"""bench/side_by_side_harness.py: the normaliser, the comparer and the request list (no servers)."""

from __future__ import annotations

import io
import json
from collections import Counter
from types import ModuleType

import pytest
from PIL import Image

from tests.bench import load_script


@pytest.fixture(scope="module")
def sbs() -> ModuleType:
    return load_script("side_by_side_harness")


def hit(score: float) -> dict:
    return {"id": 3, "score": score, "url": "/images/3", "captions": ["A dog ."]}


def test_normalise_keeps_only_the_stages_of_timings_at_any_depth(sbs: ModuleType) -> None:
    body = {
        "query": "a dog",
        "results": [hit(0.5)],
        "timings_ms": {"search": 0.2, "parse": 3.1},
        "nested": [{"timings_ms": {"cnn": 9.0}, "keep": 1}],
    }
    assert sbs.normalise(body) == {
        "query": "a dog",
        "results": [hit(0.5)],
        "timings_ms": ["parse", "search"],
        "nested": [{"timings_ms": ["cnn"], "keep": 1}],
    }


def test_answer_parses_json_and_hashes_the_rest(sbs: ModuleType) -> None:
    problem = {"type": "/problems/unusable-text", "status": 404}
    got = sbs.answer(404, "application/problem+json", json.dumps(problem).encode())
    assert got == {"status": 404, "content_type": "application/problem+json", "body": problem}
    photo = sbs.answer(200, "image/jpeg", b"\xff\xd8 bytes")
    assert photo["body"]["bytes"] == 8
    assert photo["body"] == sbs.answer(200, "image/jpeg", b"\xff\xd8 bytes")["body"]
    assert photo["body"] != sbs.answer(200, "image/jpeg", b"\xff\xd8 other")["body"]


def answer(sbs: ModuleType, body: dict, status: int = 200) -> dict:
    return sbs.answer(status, "application/json", json.dumps(body).encode())


def test_answers_differing_only_in_timings_are_identical(sbs: ModuleType) -> None:
    old = answer(sbs, {"results": [hit(0.25)], "timings_ms": {"parse": 1.0, "encode": 0.1}})
    new = answer(sbs, {"timings_ms": {"encode": 2.0, "parse": 7.5}, "results": [hit(0.25)]})
    assert sbs.compare(old, new) == ("identical", [])
    cached = answer(sbs, {"timings_ms": {"encode": 2.0}, "results": [hit(0.25)]})
    assert sbs.compare(old, cached)[0] == "different"  # parsed on one side only


def test_floats_are_compared_exactly_and_last_bits_reported_apart(sbs: ModuleType) -> None:
    old = answer(sbs, {"results": [hit(0.25), hit(0.125)]})
    close = answer(sbs, {"results": [hit(0.25), hit(0.125 * (1 + 1e-7))]})
    verdict, diffs = sbs.compare(old, close)
    assert verdict == "last-bits"
    assert [d["path"] for d in diffs] == ["$.body.results[1].score"]
    far = answer(sbs, {"results": [hit(0.25), hit(0.13)]})
    assert sbs.compare(old, far)[0] == "different"
    # a float difference beside any other difference is a plain difference
    other = answer(sbs, {"results": [hit(0.25), {**hit(0.125 * (1 + 1e-7)), "id": 4}]})
    assert sbs.compare(old, other)[0] == "different"


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ({"results": [hit(0.5)]}, {"results": [hit(0.5)], "extra": 1}, "$.body.extra"),
        ({"results": [hit(0.5)]}, {"results": []}, "$.body.results.length"),
        ({"ok": 1}, {"ok": True}, "$.body.ok"),  # equal in Python, not in JSON
        ({"ok": 1}, {"ok": 1.0}, "$.body.ok"),
        ({"t": ["A dog ."]}, {"t": ["A cat ."]}, "$.body.t[0]"),
    ],
)
def test_differences_name_their_place(sbs: ModuleType, old: dict, new: dict, path: str) -> None:
    verdict, diffs = sbs.compare(answer(sbs, old), answer(sbs, new))
    assert verdict == "different"
    assert path in [d["path"] for d in diffs]


def test_status_and_content_type_are_compared(sbs: ModuleType) -> None:
    body = {"type": "/problems/invalid-request"}
    assert sbs.compare(answer(sbs, body, 422), answer(sbs, body, 404))[0] == "different"
    problem = sbs.answer(422, "application/problem+json", json.dumps(body).encode())
    verdict, diffs = sbs.compare(answer(sbs, body, 422), problem)
    assert verdict == "different"
    assert [d["path"] for d in diffs] == ["$.content_type"]


def jpeg(color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (48, 32), color).save(out, "JPEG")
    return out.getvalue()


def test_the_requests_cover_the_issue_s_list(sbs: ModuleType) -> None:
    photos = sbs.Photos([jpeg("red")] * 3, [jpeg(c) for c in ("blue", "green", "gray", "tan")], [])
    photos = sbs.Photos(photos.gallery, photos.fresh, list(range(1, 13)))
    asked = sbs.decoder_requests(photos) + sbs.no_decoder_requests(photos)
    assert len(asked) >= 100
    assert not [
        n for n, c in Counter(r.name for r in sbs.decoder_requests(photos)).items() if c > 1
    ]
    routes = {(r.method, r.path.split("/{")[0].rstrip("0123456789/")) for r in asked}
    for route in [
        ("POST", "/search"),
        ("GET", "/explain"),
        ("POST", "/describe"),
        ("POST", "/paraphrase"),
        ("POST", "/arithmetic"),
        ("POST", "/arithmetic/upload"),
        ("GET", "/images"),
        ("POST", "/gallery/images"),
        ("DELETE", "/gallery/images"),
        ("GET", "/ready"),
    ]:
        assert route in routes
    describe = [r for r in asked if r.path == "/describe"]
    assert {dict(r.params).get("sentences") for r in describe} >= {None, "generated", "retrieved"}
    # the later writes of a server use the ids its own earlier answers gave
    captures = [r.capture for r in asked if r.capture]
    assert captures == ["a", "b"]
    assert any("{a}" in r.path for r in asked) and any("{b}" in r.path for r in asked)


def test_q_repeats_lists_and_writes_booleans_as_the_query_does(sbs: ModuleType) -> None:
    assert sbs.q(image_id=3, plus=["red", "a ball"], rerank=True) == (
        ("image_id", "3"),
        ("plus", "red"),
        ("plus", "a ball"),
        ("rerank", "true"),
    )
