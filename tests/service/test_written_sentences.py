"""Sentences the caption decoder writes, through the API: /describe, /arithmetic's
``sentence``, /paraphrase, and a server without a decoder (real gallery of 8 Flickr8k
test photos, the shipped checkpoint and decoder)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from groundsearch.model.runtime.captioning import DecoderError
from groundsearch.service.core.writing import served_decoder
from groundsearch.service.http.app import create_app

#: Words that name nothing in a photo (a shared one proves nothing).
STOP = set(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "with",
        "and",
        "is",
        "are",
        "to",
        "its",
        "his",
        "her",
        "their",
        "for",
        "by",
        "from",
    ]
)


@pytest.fixture(scope="module")
def client(service_components):
    captioner = service_components.captioner
    if captioner.decoder is None:
        pytest.fail(f"the shipped caption decoder did not load: {captioner.status}")
    with TestClient(create_app(service_components.settings, service_components)) as c:
        yield c


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower())) - STOP


def photo(components, image_id: int) -> tuple[bytes, list[str]]:
    gallery = components.gallery
    return gallery.photo_path(image_id).read_bytes(), list(gallery.image(image_id).captions)


def test_describe_writes_sentences_that_name_what_is_in_the_photo(client, service_components):
    named = saw = 0
    ids = service_components.gallery.image_ids()
    for image_id in ids:
        data, references = photo(service_components, image_id)
        res = client.post(
            "/describe", params={"k": 3, "min_relevance": 0}, files={"image": ("p.jpg", data)}
        )
        assert res.status_code == 200, res.text
        body = res.json()
        written = body["generated"]
        assert len(written) == 3 and len(body["results"]) == 3
        assert [w["score"] for w in written] == sorted((w["score"] for w in written), reverse=True)
        assert len({w["text"] for w in written}) == 3
        assert all(w["text"][0].isupper() and w["text"].endswith(".") for w in written)
        assert "generate" in body["timings_ms"] and "cnn" in body["timings_ms"]
        assert "classify" in body["timings_ms"]  # on the same CNN pass
        concepts = body["concepts"]
        assert len(concepts) <= 5
        saw += bool(concepts)
        assert all(c["probability"] >= 0.05 for c in concepts)
        assert [c["probability"] for c in concepts] == sorted(
            (c["probability"] for c in concepts), reverse=True
        )
        for c in concepts:
            assert c["word"] is None or c["word_probability"] >= c["probability"] - 1e-4
        named += bool(words(written[0]["text"]) & set().union(*map(words, references)))
    # a fluent sentence about the photo shares a content word with its five references
    assert named >= len(ids) - 2, f"only {named} of {len(ids)} written sentences fit"
    assert saw >= len(ids) // 2  # the classifier sees something in most photos


def test_describe_answers_one_kind_when_asked_and_is_deterministic(client, service_components):
    data, _ = photo(service_components, service_components.gallery.image_ids()[1])
    upload = {"image": ("p.jpg", data)}
    only_written = client.post(
        "/describe", params={"sentences": "generated", "beam": 5}, files=upload
    )
    assert only_written.status_code == 200, only_written.text
    body = only_written.json()
    assert body["results"] == [] and len(body["generated"]) == 5
    again = client.post("/describe", params={"sentences": "generated", "beam": 5}, files=upload)
    assert again.json()["generated"] == body["generated"]
    only_found = client.post("/describe", params={"sentences": "retrieved"}, files=upload).json()
    assert only_found["generated"] == [] and len(only_found["results"]) == 5
    assert "generate" not in only_found["timings_ms"]
    bad = client.post("/describe", params={"sentences": "poems", "beam": 0}, files=upload)
    assert bad.status_code == 422
    assert {e["loc"][-1] for e in bad.json()["errors"]} == {"sentences", "beam"}


def test_arithmetic_says_the_result_in_words(client, service_components):
    image_id = service_components.gallery.image_ids()[0]
    plain = client.post("/arithmetic", params={"image_id": image_id, "k": 3})
    assert plain.status_code == 200 and plain.json()["generated"] == []
    said = client.post(
        "/arithmetic",
        params={"image_id": image_id, "k": 3, "plus": ["snow", "snow"], "sentence": "true"},
    )
    assert said.status_code == 200, said.text
    written = said.json()["generated"]
    assert written and "generate" in said.json()["timings_ms"]
    # the change shows in the words: the moved vector's sentence mentions snow
    assert any("snow" in w["text"].lower() for w in written), written


def test_paraphrase_keeps_what_the_sentence_is_about(client):
    res = client.post("/paraphrase", params={"text": "A black dog runs along the beach"})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["query"] == "A black dog runs along the beach" and len(body["generated"]) == 3
    assert any("dog" in w["text"].lower() for w in body["generated"]), body["generated"]
    assert {"parse", "encode", "generate"} <= set(body["timings_ms"])
    unusable = client.post("/paraphrase", params={"text": "?!"})
    assert unusable.status_code == 404
    assert unusable.json()["type"] == "/problems/unusable-text"


def test_metrics_and_ready_name_the_decoder(client):
    client.post("/paraphrase", params={"text": "two children play in the water"})
    assert 'groundsearch_stage_seconds_count{stage="generate"}' in client.get("/metrics").text
    assert client.get("/ready").json()["decoder"].startswith("decoder.pt")


def test_a_server_without_a_decoder_says_so(client, service_components, monkeypatch):
    monkeypatch.setattr(service_components.captioner, "decoder", None)
    monkeypatch.setattr(service_components.captioner, "status", "none")
    data, _ = photo(service_components, service_components.gallery.image_ids()[0])
    both = client.post("/describe", files={"image": ("p.jpg", data)})
    assert both.status_code == 200 and both.json()["generated"] == []
    assert both.json()["results"]
    for res in (
        client.post("/describe", params={"sentences": "generated"}, files={"image": ("p", data)}),
        client.post("/paraphrase", params={"text": "a dog"}),
        client.post("/arithmetic", params={"image_id": 1, "sentence": "true"}),
    ):
        assert res.status_code == 501, res.text
        assert res.json()["type"] == "/problems/no-decoder"
        assert "caption decoder: none" in res.json()["detail"]
    assert client.get("/ready").json()["decoder"] == "none"


def test_which_decoder_the_server_loads(service_components, tmp_path):
    settings = service_components.settings
    # the shipped decoder against another checkpoint: off, and /ready says why
    decoder, status = served_decoder(settings, {"checkpoint_sha256": "another"})
    assert decoder is None and status.startswith("off: ")
    # a decoder file named in the settings must load, or the server does not start
    identity = service_components.identity
    missing = settings.model_copy(update={"decoder": str(tmp_path / "none.pt")})
    with pytest.raises(DecoderError, match="decoder not found"):
        served_decoder(missing, identity)
    off = settings.model_copy(update={"decoder": "none"})
    assert served_decoder(off, identity) == (None, "none")


def test_the_taggers_beside_a_named_decoder_and_relevance_are_served(service_components, tmp_path):
    """``make refit`` writes a decoder, a relevance and their taggers into one folder: a
    server naming that decoder and relevance reads the taggers beside them, else the
    model directory's."""
    import dataclasses
    import shutil

    from groundsearch.model.runtime.tagger import FILE_NAME, VECTORS_FILE_NAME, WordTagger
    from groundsearch.service.core.relevance import served_relevance, served_tagger
    from groundsearch.service.core.writing import caption_tagger

    settings, identity = service_components.settings, service_components.identity
    backbone = service_components.model.backbone
    refit = tmp_path / "refit"
    refit.mkdir()
    for name in ("decoder.pt", "relevance.json"):
        shutil.copy(settings.model_dir / name, refit / name)
    named = settings.model_copy(
        update={"decoder": str(refit / "decoder.pt"), "relevance": str(refit / "relevance.json")}
    )
    relevance, _ = served_relevance(named, identity)
    shipped_words = WordTagger.load(settings.model_dir / FILE_NAME, backbone=backbone).words
    # nothing beside them: the model directory's taggers
    assert caption_tagger(named, backbone).words == shipped_words
    shipped_vectors = served_tagger(named, identity, relevance)
    assert shipped_vectors is not None and len(shipped_vectors.words) > 3

    # a refit's taggers (here the shipped ones cut to three nouns) beside them: those
    for name in (FILE_NAME, VECTORS_FILE_NAME):
        full = WordTagger.load(settings.model_dir / name)
        cut = dataclasses.replace(
            full,
            words=full.words[:3],
            lemmas=full.lemmas[:3],
            weight=full.weight[:3],
            bias=full.bias[:3],
        )
        cut.save(refit / name)
    assert caption_tagger(named, backbone).words == shipped_words[:3]
    beside = served_tagger(named, identity, relevance)
    assert beside is not None and beside.words == shipped_vectors.words[:3]
